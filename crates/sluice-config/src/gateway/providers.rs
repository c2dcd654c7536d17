//! `[providers.NAME]`, read in parts by `kind` into the types of `sluice-providers`: where
//! the upstream is, how it is reached, and its kind's own settings. A key that only another
//! kind takes is named as such.

use sluice_providers::params::{ProviderKind, ReadPart, Upstream};
use sluice_providers::{HttpSettings, ProviderParams};

use crate::diagnostic::Diagnostic;
use crate::document::{Document, Parts};

/// `[providers.NAME]`: one upstream endpoint with its own connection pool.
pub type ProviderConfig = ProviderParams;

impl ReadPart for Parts<'_, '_> {
    fn read<T: serde::de::DeserializeOwned>(&mut self) -> Option<T> {
        Parts::read(self)
    }
}

/// Whether a kind's own settings take one key.
struct Probe<'p, 'd, 'a> {
    parts: &'p Parts<'d, 'a>,
    key: &'p str,
    took: bool,
}

impl ReadPart for Probe<'_, '_, '_> {
    fn read<T: serde::de::DeserializeOwned>(&mut self) -> Option<T> {
        self.took = self.parts.takes::<T>(self.key);
        None
    }
}

/// Every `[providers.*]` entry, in file order.
pub(super) fn read(
    doc: &Document<'_>,
    diags: &mut Vec<Diagnostic>,
) -> Vec<(String, ProviderConfig)> {
    doc.map_tables("providers", diags, |parts| {
        let upstream: Option<Upstream> = parts.read();
        let http: Option<HttpSettings> = parts.read();
        let settings = upstream.as_ref().and_then(|u| u.kind.read(parts));
        let kind = upstream.as_ref().map(|u| u.kind);
        parts.finish(|parts, key| {
            let others = ProviderKind::ALL.into_iter().filter(|k| Some(*k) != kind);
            let owners: Vec<String> = others
                .filter(|k| {
                    let mut probe = Probe {
                        parts,
                        key,
                        took: false,
                    };
                    k.read(&mut probe);
                    probe.took
                })
                .map(|k| format!("\"{}\"", k.name()))
                .collect();
            (!owners.is_empty()).then(|| format!("only applies to kind = {}", owners.join(" or ")))
        });
        Some(ProviderParams {
            upstream: upstream?,
            http: http?,
            settings: settings?,
        })
    })
}
