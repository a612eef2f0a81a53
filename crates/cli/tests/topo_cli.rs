//! `railyard topo list|show|validate` and topology files, good and bad.

mod common;
use common::{json, railyard};
use std::path::PathBuf;

fn repo_file(rel: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").join(rel).display().to_string()
}

fn temp_file(name: &str, text: &str) -> String {
    let dir = std::env::temp_dir().join(format!("railyard-topo-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

#[test]
fn list_documents_every_preset() {
    let list = json(&["topo", "list", "--format", "json"]);
    let names: Vec<&str> = list.as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["hgx-h100x2", "a100-pcie-control", "rail", "clos", "mesh"]);
    for p in list.as_array().unwrap() {
        assert!(p["source"].as_str().unwrap().contains("seed 00"));
    }
    // Every listed preset builds and shows.
    for name in names {
        let spec = if name == "clos" { "clos:k=4" } else { name };
        let shown = json(&["topo", "show", spec, "--format", "json"]);
        assert!(shown["gpus"].as_u64().unwrap() > 0);
    }
}

#[test]
fn hgx_preset_has_the_seed_numbers() {
    let t = json(&["topo", "show", "hgx-h100x2", "--format", "json"]);
    assert_eq!(t["gpus"], 16);
    assert_eq!(t["servers"], 2);
    assert!((t["round_startup_secs"].as_f64().unwrap() - 0.833e-6).abs() < 1e-15);
    let links = t["links"].as_array().unwrap();
    let nvlink = links.iter().find(|l| l["class"] == "nvlink").unwrap();
    assert_eq!(nvlink["bytes_per_sec"].as_f64().unwrap(), 450e9);
    let nic = links.iter().find(|l| l["class"] == "nic").unwrap();
    assert_eq!(nic["bytes_per_sec"].as_f64().unwrap(), 50e9);
}

#[test]
fn the_file_form_of_the_control_setting_costs_like_the_preset() {
    let file = repo_file("topologies/a100-pcie-control.toml");
    let out = railyard(&["topo", "validate", &file]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let from_file = json(&["plan", "--topo", &file, "--algo", "ring,hierarchical", "--format", "json"]);
    let preset = json(&["plan", "--topo", "a100-pcie-control", "--algo", "ring,hierarchical", "--format", "json"]);
    for i in 0..2 {
        let a = from_file["algorithms"][i]["total_secs"].as_f64().unwrap();
        let b = preset["algorithms"][i]["total_secs"].as_f64().unwrap();
        assert!((a - b).abs() < 1e-12, "{a} vs {b}");
    }
}

#[test]
fn json_files_work_too() {
    let file = temp_file(
        "two.json",
        r#"{"name": "two", "round_startup": 1e-6,
            "devices": [{"name": "g0", "kind": "gpu", "server": "a"}, {"name": "g1", "kind": "gpu", "server": "b"},
                        {"name": "sw", "kind": "switch", "tier": 1}],
            "links": [{"from": "g0", "to": "sw", "bandwidth": "100 Gbit/s"}, {"from": "g1", "to": "sw", "bandwidth": 12.5e9}]}"#,
    );
    let plan = json(&["plan", "--topo", &file, "--size", "1MiB", "--algo", "ring", "--format", "json"]);
    // 2 ranks: 2 rounds of 512 KiB at 12.5 GB/s + 2 µs.
    let t = plan["algorithms"][0]["total_secs"].as_f64().unwrap();
    let expected = 2.0 * (1e-6 + 512.0 * 1024.0 / 12.5e9);
    assert!((t - expected).abs() < 1e-12, "{t} vs {expected}");
}

#[test]
fn bad_files_name_the_field() {
    let device = "[[device]]\nname = \"g0\"\nkind = \"gpu\"\n[[device]]\nname = \"g1\"\nkind = \"gpu\"\n";
    let cases = [
        (
            "unknown-device.toml",
            format!("{device}[[link]]\nfrom = \"g0\"\nto = \"g9\"\nbandwidth = \"1 GB/s\"\n"),
            "link[0].to: unknown device \"g9\"",
        ),
        (
            "negative.toml",
            format!("{device}[[link]]\nfrom = \"g0\"\nto = \"g1\"\nbandwidth = \"-5 GB/s\"\n"),
            "link[0] (g0 -> g1).bandwidth",
        ),
        (
            "negative-number.toml",
            format!("{device}[[link]]\nfrom = \"g0\"\nto = \"g1\"\nbandwidth = -5.0\n"),
            "bandwidth must be a positive",
        ),
        (
            "bad-unit.toml",
            format!("{device}[[link]]\nfrom = \"g0\"\nto = \"g1\"\nbandwidth = \"5 furlongs\"\n"),
            "unknown unit",
        ),
        (
            "not-gpu.toml",
            format!("ranks = [\"g0\", \"n\"]\n{device}[[device]]\nname = \"n\"\nkind = \"nic\"\n"),
            "not a GPU",
        ),
        ("kind.toml", "[[device]]\nname = \"g0\"\nkind = \"tpu\"\n".to_string(), "line 3"),
        ("missing.toml", "[[device]]\nkind = \"gpu\"\n".to_string(), "missing field `name`"),
        ("syntax.toml", "[[device]\nname = \"x\"\n".to_string(), "line 1"),
        ("twice.toml", format!("{device}[[device]]\nname = \"g0\"\nkind = \"gpu\"\n"), "declared twice"),
        ("self.toml", format!("{device}[[link]]\nfrom = \"g0\"\nto = \"g0\"\nbandwidth = 1\n"), "to itself"),
        (
            "iface.toml",
            format!("{device}[[link]]\nfrom = \"g0\"\nto = \"g1\"\nbandwidth = 1\ninterfaces = [\"slot\"]\n"),
            "link[0].interfaces[0]: unknown interface",
        ),
        ("unknown-key.toml", format!("{device}[[link]]\nfrom = \"g0\"\nto = \"g1\"\nbandwith = 1\n"), "unknown field"),
        ("unreachable.toml", device.to_string(), "no route"),
        ("bad.json", "{\"devices\": [{\"name\": 3}]}".to_string(), "line 1"),
    ];
    for (name, text, needle) in cases {
        let file = temp_file(name, &text);
        let out = railyard(&["topo", "validate", &file]);
        assert_ne!(out.code, 0, "{name} should be rejected");
        assert!(!out.stderr.contains("panicked"), "{name} panicked: {}", out.stderr);
        assert!(out.stderr.contains(needle), "{name}: expected {needle:?} in {}", out.stderr);
    }
    let out = railyard(&["topo", "validate", "/nonexistent/railyard.toml"]);
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("cannot read"), "{}", out.stderr);
}
