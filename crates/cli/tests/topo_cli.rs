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
    assert_eq!(
        names,
        [
            "hgx-h100x2",
            "a100-pcie-control",
            "rail",
            "clos",
            "dgx-h100",
            "hgx-h200",
            "dgx-a100",
            "hgx-b200",
            "gb200-nvl72",
            "mesh"
        ]
    );
    // The chapters' presets point at docs/sources.md; the real machines at their public
    // documents.
    for p in list.as_array().unwrap() {
        let source = p["source"].as_str().unwrap();
        assert!(source.contains("docs/sources.md") || source.contains("hardware-sources.md"), "{source}");
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
    assert!((t["round_startup"].as_f64().unwrap() - 0.833e-6).abs() < 1e-15);
    let links = t["link"].as_array().unwrap();
    let nvlink = links.iter().find(|l| l["class"] == "nvlink").unwrap();
    assert_eq!(nvlink["bandwidth"].as_f64().unwrap(), 450e9);
    let nic = links.iter().find(|l| l["class"] == "nic").unwrap();
    assert_eq!(nic["bandwidth"].as_f64().unwrap(), 50e9);
}

/// What `topo show --format json` and `topo export -o x.toml|x.json` write loads again
/// and shows the same, byte for byte; `-o x.json` never writes XML.
#[test]
fn shown_and_exported_topologies_load_again() {
    for spec in ["hgx-h100x2", "rail:servers=3,gpus=4,over=3:1", "clos:k=4,tiers=3", "a100-pcie-control:ports=3"] {
        let shown = railyard(&["topo", "show", spec, "--format", "json"]).stdout;
        let json_file = temp_file("shown.json", &shown);
        assert_eq!(railyard(&["topo", "show", &json_file, "--format", "json"]).stdout, shown, "{spec}");
        for ext in ["toml", "json"] {
            let path = temp_file(&format!("exported.{ext}"), "");
            let out = railyard(&["topo", "export", spec, "-o", &path]);
            assert_eq!(out.code, 0, "{}", out.stderr);
            assert_eq!(railyard(&["topo", "show", &path, "--format", "json"]).stdout, shown, "{spec} .{ext}");
            let plan_a = json(&["plan", "--topo", spec, "--algo", "ring", "--format", "json"]);
            let plan_b = json(&["plan", "--topo", &path, "--algo", "ring", "--format", "json"]);
            assert_eq!(plan_a["algorithms"], plan_b["algorithms"]);
        }
    }
    let xml = railyard(&["topo", "export", "hgx-h100x2"]).stdout;
    assert!(xml.starts_with("<system"), "{xml}");
    let toml = railyard(&["topo", "export", "hgx-h100x2", "--format", "toml"]).stdout;
    assert!(toml.contains("[[device]]"), "{toml}");
    for bad in [
        vec!["topo", "export", "hgx-h100x2", "-o", "x.json", "--format", "nccl-xml"],
        vec!["topo", "export", "hgx-h100x2", "-o", "x.yaml"],
    ] {
        let out = railyard(&bad);
        assert_eq!(out.code, 2, "{bad:?}");
        assert!(out.stderr.contains("-o"), "{}", out.stderr);
    }
    // The summary counts are checked when present.
    let edited = temp_file(
        "edited.json",
        &railyard(&["topo", "show", "hgx-h100x2", "--format", "json"]).stdout.replace("\"gpus\": 16", "\"gpus\": 15"),
    );
    let out = railyard(&["topo", "validate", &edited]);
    assert!(out.stderr.contains("gpus: 15, but its devices hold 16"), "{}", out.stderr);
}

/// Files that describe nothing to run on, or numbers no link has, are refused with the field.
#[test]
fn empty_and_absurd_files_are_refused() {
    for (name, text, word) in [
        ("empty.toml", "", "no GPU"),
        ("switch-only.toml", "[[device]]\nname = \"s\"\nkind = \"switch\"\n", "no GPU"),
        (
            "slow.toml",
            "[[device]]\nname = \"a\"\nkind = \"gpu\"\n[[device]]\nname = \"b\"\nkind = \"gpu\"\n\
             [[link]]\nfrom = \"a\"\nto = \"b\"\nbandwidth = 1e-300\n",
            "1 byte/s to 10 PB/s",
        ),
        ("noname.toml", "[[device]]\nname = \"\"\nkind = \"gpu\"\n", "is empty"),
    ] {
        let path = temp_file(name, text);
        for args in [vec!["topo", "validate", path.as_str()], vec!["plan", "--topo", path.as_str()]] {
            let out = railyard(&args);
            assert_eq!(out.code, 2, "{args:?}");
            assert!(out.stderr.contains(word), "{args:?}: {}", out.stderr);
        }
    }
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
            "bandwidth must be 1 byte/s to 10 PB/s",
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

/// A preset says which of its switches reduce in the network, and `rail` turns its
/// switches' reduction off with sharp=off (the in-network algorithm then cannot run).
#[test]
fn presets_say_what_reduces_in_the_network() {
    for (topo, says) in [
        ("hgx-h100x2", "In the network: no NVSwitch devices reduce (no NVLS); 10 network switches reduce (SHARP)."),
        ("rail:servers=2,sharp=off", "Nothing reduces in the network"),
        ("dgx-h100", "In the network: 1 NVSwitch device reduces (NVLS); no network switches reduce (no SHARP)."),
        ("clos:k=4", "In the network: 6 network switches reduce (SHARP)."),
    ] {
        let out = railyard(&["topo", "show", topo]);
        assert_eq!(out.code, 0, "{}", out.stderr);
        assert!(out.stdout.contains(says), "{topo}: {}", out.stdout);
    }
    let off = railyard(&["plan", "--topo", "rail:servers=2,sharp=off", "--algo", "in-network"]);
    assert_ne!(off.code, 0);
    assert!(off.stderr.contains("no switch of this topology reduces in the network"), "{}", off.stderr);
    let bad = railyard(&["topo", "show", "rail:sharp=maybe"]);
    assert!(bad.stderr.contains("sharp=maybe: on or off"), "{}", bad.stderr);
}
