//! The Clos generator (topology) and the Clos closed forms (model) are written
//! separately; they must agree on every count.

use railyard_netmodels::clos::{clos_cut, leaf_ports, ClosInput};
use railyard_topology::{presets::preset, DeviceKind};

#[test]
fn generated_fabrics_match_the_closed_forms() {
    for (k, tiers, ratio) in [
        (8, 2, (1, 1)),
        (8, 2, (3, 1)),
        (4, 3, (1, 1)),
        (8, 3, (1, 1)),
        (8, 3, (3, 1)),
        (12, 2, (2, 1)),
        (8, 2, (2, 1)),
        (10, 3, (3, 1)),
    ] {
        let spec = format!("clos:k={k},tiers={tiers},over={}:{}", ratio.0, ratio.1);
        let t = preset(&spec).unwrap();
        let split = leaf_ports(k, ratio).unwrap();
        let (down, up) = (split.down, split.up);
        let model =
            clos_cut(&ClosInput { ports: k, tiers, down, up, port_bytes_per_sec: 50e9, job_cards: None }).unwrap();
        let switches = t.devices.iter().filter(|d| d.kind == DeviceKind::Switch).count();
        assert_eq!(t.gpus().len(), model.endpoints, "{spec}");
        assert_eq!(switches, model.switches, "{spec}");
        // No switch uses more than k ports.
        for (id, d) in t.devices.iter().enumerate() {
            if d.kind == DeviceKind::Switch {
                assert!(t.out_links(id).len() <= k, "{spec}: {} has {} ports", d.name, t.out_links(id).len());
            }
        }
        // Top-tier links: those into the highest tier.
        let top = t.devices.iter().filter_map(|d| d.tier).max().unwrap();
        let top_links = t.links.iter().filter(|l| t.devices[l.to].tier == Some(top)).count();
        assert_eq!(top_links, model.top_links, "{spec}");
    }
}
