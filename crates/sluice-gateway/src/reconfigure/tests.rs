#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;

use sluice_config::gateway::{self, GatewayConfig};

use super::restart_needed;

fn config(tenants: &str) -> GatewayConfig {
    let text = format!(
        "[providers.up]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9\"\n\
         [models.chat]\ndeployments = [{{ provider = \"up\", model = \"m\" }}]\n\
         [prices.m]\ninput = 1.0\noutput = 2.0\n{tenants}"
    );
    gateway::load(&text, &BTreeMap::<String, String>::new(), &[]).unwrap()
}

/// A tenant given credits, or a new tenant with neither lane nor class, changes in place; a
/// lane or class given, changed or taken away is named as needing a restart.
#[test]
fn only_a_tenants_lane_or_class_needs_a_restart() {
    let old = config("[tenants.acme]\ncredits = 10.0\n");
    let in_place = [
        "[tenants.acme]\ncredits = 20.0\n",
        "[tenants.acme]\ncredits = 10.0\n[tenants.beta]\ncredits = 5.0\n",
        "",
    ];
    for new in in_place {
        let needed = restart_needed(&old, &config(new));
        assert!(needed.is_empty(), "{new:?}: {needed:?}");
    }
    let at_restart = [
        "[tenants.acme]\ncredits = 10.0\nlane = \"batch\"\n",
        "[tenants.acme]\ncredits = 10.0\nclass = \"free\"\n",
        "[tenants.acme]\ncredits = 10.0\n[tenants.beta]\nlane = \"batch\"\n",
    ];
    for new in at_restart {
        let needed = restart_needed(&old, &config(new));
        assert_eq!(needed, ["[tenants] lane or class"], "{new:?}");
    }
}
