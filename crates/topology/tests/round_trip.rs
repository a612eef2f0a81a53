//! Every topology written in the file format (what `topo show --format json` and
//! `topo export -o x.toml|x.json` write) loads again as the same topology: devices,
//! directed links with their interfaces, interfaces, ranks, α and host costs.

use proptest::prelude::*;
use railyard_topology::file::{self, FileFormat};
use railyard_topology::presets::preset;

fn round_trips(spec: &str) -> Result<(), TestCaseError> {
    let mut t = preset(spec).map_err(|e| TestCaseError::fail(format!("{spec}: {e}")))?;
    same_after_a_round_trip(spec, &t)?;
    t.routing = railyard_topology::Routing::Widest;
    same_after_a_round_trip(spec, &t)
}

fn same_after_a_round_trip(spec: &str, t: &railyard_topology::Topology) -> Result<(), TestCaseError> {
    for format in [FileFormat::Toml, FileFormat::Json] {
        let text = file::write(t, format).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let back = file::parse(&text, format, "other-name").map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert!(&back == t, "{spec} via {format:?} differs");
        // Writing the reloaded topology gives the same text.
        prop_assert_eq!(file::write(&back, format).unwrap(), text);
    }
    Ok(())
}

#[test]
fn every_preset_at_its_defaults_round_trips() {
    for spec in ["hgx-h100x2", "a100-pcie-control", "rail", "clos", "mesh"] {
        round_trips(spec).unwrap();
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn generated_fabrics_round_trip(
        servers in 1usize..6, gpus in 1usize..9, group in 1usize..4, spines in 1usize..4,
        over in prop::sample::select(vec!["1:1", "3:1", "2:1"]),
        nvlink in 1u32..900, ports in 1usize..5, local in any::<bool>(),
        k in prop::sample::select(vec![4usize, 6, 8]), tiers in 2usize..4, mesh in 2usize..12,
    ) {
        round_trips(&format!(
            "rail:servers={servers},gpus={gpus},group={group},spines={spines},over={over},nvlink={nvlink}GB/s,alpha=1.5us"
        ))?;
        round_trips(&format!("a100-pcie-control:ports={ports}{}", if local { ",local=300GB/s" } else { "" }))?;
        round_trips(&format!("clos:k={k},tiers={tiers},over={over}"))?;
        round_trips(&format!("mesh:ranks={mesh},bw=12.5GB/s"))?;
    }
}
