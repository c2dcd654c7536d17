//! Who a request is for: its API key's tenant when keys are required (401 without a valid
//! one), else the tenant it names in `x-sluice-tenant`; and whether its key may use the model
//! group it asks for. Keys are required once any key exists, from the configuration, the
//! store or the admin API, unless the configuration turns the check off explicitly.

use std::sync::Arc;

use http::HeaderMap;
use sluice_core::{ErrorKind, GatewayError};
use sluice_economy::ApiKey;

use super::ingress;
use crate::Gateway;

/// A request's caller.
#[derive(Clone, Debug, Default)]
pub struct Identity {
    /// Its tenant, if known.
    pub tenant: Option<Arc<str>>,
    /// Its key, if it sent a valid one.
    pub key: Option<Arc<ApiKey>>,
}

/// The token of an `Authorization: Bearer <token>` header.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(http::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

/// Whether the request's bearer token is one of `tokens` (compared as hashes, so the time
/// taken says nothing about any of them).
pub fn carries<'a>(headers: &HeaderMap, tokens: impl IntoIterator<Item = &'a str>) -> bool {
    use sluice_economy::keys::hash;
    let Some(sent) = bearer(headers).map(hash) else {
        return false;
    };
    tokens.into_iter().any(|t| hash(t) == sent)
}

/// The key a request presents: `Authorization: Bearer <key>`, else `x-api-key` (what
/// Anthropic's clients send).
pub fn presented_key(headers: &HeaderMap) -> Option<&str> {
    let header = |name| {
        headers
            .get(name)?
            .to_str()
            .ok()
            .map(str::trim)
            .filter(|t| !t.is_empty())
    };
    bearer(headers)
        .or_else(|| header(X_API_KEY))
        .or_else(|| header(X_GOOG_API_KEY))
}

const X_API_KEY: http::HeaderName = http::HeaderName::from_static("x-api-key");
/// Google's clients send their key here.
const X_GOOG_API_KEY: http::HeaderName = http::HeaderName::from_static("x-goog-api-key");

fn unauthorized(message: &str) -> GatewayError {
    GatewayError::new(ErrorKind::Unauthorized, message.to_string())
}

/// Identifies the caller of a request with `headers`. The key itself never appears in an
/// error or a log.
pub fn identify(gw: &Gateway, headers: &HeaderMap) -> Result<Identity, GatewayError> {
    identify_presented(gw, presented_key(headers), || ingress::tenant(headers))
}

/// Identifies a caller who presented `key` (if any) and names the tenant `tenant` gives
/// (read only when no key decides it).
pub fn identify_presented(
    gw: &Gateway,
    presented: Option<&str>,
    tenant: impl FnOnce() -> Result<Option<Arc<str>>, GatewayError>,
) -> Result<Identity, GatewayError> {
    let key = presented.and_then(|token| gw.tenants.keys.authenticate(token));
    if gw.tenants.key_check.required(&*gw.tenants.keys) {
        let Some(key) = key else {
            return Err(if presented.is_some() {
                unauthorized("the API key is not valid")
            } else {
                unauthorized(
                    "an API key is required: send `Authorization: Bearer <key>` or `x-api-key`",
                )
            });
        };
        return Ok(Identity {
            tenant: Some(key.spec.tenant.clone()),
            key: Some(key),
        });
    }
    match key {
        Some(key) => Ok(Identity {
            tenant: Some(key.spec.tenant.clone()),
            key: Some(key),
        }),
        None => Ok(Identity {
            tenant: tenant()?,
            key: None,
        }),
    }
}

impl Identity {
    /// The lane of requests that name none: the key's, else the tenant's, else the first.
    pub fn default_lane(&self, gw: &Gateway) -> usize {
        let by_key = self
            .key
            .as_ref()
            .and_then(|k| k.spec.lane.as_deref())
            .and_then(|lane| gw.lanes.iter().position(|l| &*l.name == lane));
        by_key.unwrap_or_else(|| self.tenant.as_ref().map_or(0, |t| gw.tenant_lane(t)))
    }

    /// Whether the caller may use `group` (always, without a key).
    pub fn allows(&self, group: &str) -> bool {
        self.key.as_ref().is_none_or(|k| k.spec.allows(group))
    }

    /// A 403 naming `model` when the key may not use that group.
    pub fn may_use(&self, group: &str) -> Result<(), GatewayError> {
        match &self.key {
            Some(k) if !self.allows(group) => Err(GatewayError::new(
                ErrorKind::ModelNotAllowed,
                format!(
                    "API key `{}` may not use model `{group}`; it may use: {}",
                    k.spec.name,
                    k.spec.models.join(", ")
                ),
            )
            .with_param("model")),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    #[test]
    fn bearer_tokens_are_read_whatever_the_scheme_case() {
        let mut h = HeaderMap::new();
        assert_eq!(bearer(&h), None);
        for (value, want) in [
            ("Bearer sk-1", Some("sk-1")),
            ("bearer  sk-2 ", Some("sk-2")),
            ("Basic abc", None),
            ("Bearer", None),
            ("Bearer  ", None),
        ] {
            h.insert(
                http::header::AUTHORIZATION,
                HeaderValue::from_str(value).unwrap(),
            );
            assert_eq!(bearer(&h), want, "{value}");
        }
    }
}
