//! The worked topology files of docs/topology-files.md validate and plan, so the guide
//! stays true.

mod common;
use common::{json, railyard};
use std::path::PathBuf;

fn repo(path: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").join(path).display().to_string()
}

#[test]
fn the_guides_files_validate_and_plan() {
    for (file, gpus, servers) in [("topologies/two-node-cluster.toml", 8, 2), ("topologies/pcie-box.toml", 4, 1)] {
        let path = repo(file);
        let out = railyard(&["topo", "validate", &path]);
        assert!(out.code == 0 && out.stdout.contains("valid"), "{file}: {}", out.stderr);
        let shown = json(&["topo", "show", &path, "--format", "json"]);
        assert_eq!(shown["gpus"], gpus, "{file}");
        assert_eq!(shown["servers"], servers, "{file}");
        let plan = json(&["plan", "--topo", &path, "--size", "64MiB", "--format", "json"]);
        assert!(!plan["algorithms"].as_array().unwrap().is_empty(), "{file}");
    }
    // The guide's claims: the NIC links are what the 2-node cluster's ring waits on.
    let plan =
        json(&["plan", "--topo", &repo("topologies/two-node-cluster.toml"), "--algo", "ring", "--format", "json"]);
    let class = plan["algorithms"][0]["bottleneck"]["kind"].as_str().unwrap_or_default().to_string();
    assert_eq!(class, "nic", "{}", plan["algorithms"][0]["bottleneck"]);
    let doc = std::fs::read_to_string(repo("docs/topology-files.md")).unwrap();
    for needle in ["two-node-cluster.toml", "pcie-box.toml", "in_network_reduction", "rail", "tier"] {
        assert!(doc.contains(needle), "{needle}");
    }
}
