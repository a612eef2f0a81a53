//! `railyard topo import` / `export` and ring search through the CLI (seed 000 §8.3.3, §8.4.3).

mod common;
use common::{json, railyard, MIB};
use std::path::PathBuf;

fn sample(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../topologies/samples").join(name).display().to_string()
}

fn temp(name: &str) -> String {
    let dir = std::env::temp_dir().join(format!("railyard-import-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name).display().to_string()
}

fn ring_secs(topo: &str) -> f64 {
    json(&["plan", "--topo", topo, "--algo", "ring", "--format", "json"])["algorithms"][0]["total_secs"]
        .as_f64()
        .unwrap()
}

#[test]
fn dgx_a100_matrix_is_an_nvswitch_of_nv12() {
    let out = temp("a100.toml");
    let t =
        json(&["topo", "import", "--nvidia-smi", &sample("dgx-a100.nvidia-smi.txt"), "-o", &out, "--format", "json"]);
    assert_eq!(t["topology"]["gpus"], 8);
    let nvlinks: Vec<f64> = t["topology"]["link"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["class"] == "nvlink")
        .map(|l| l["bandwidth"].as_f64().unwrap())
        .collect();
    assert!(!nvlinks.is_empty() && nvlinks.iter().all(|&b| b == 300e9), "NV12 = 12 x 25 GB/s to one NVSwitch");
    // Ring all-reduce of 192 MiB over 8 GPUs: 14 rounds of 24 MiB at 300 GB/s + α.
    let expected = 14.0 * (0.833e-6 + 24.0 * MIB / 300e9);
    assert!((ring_secs(&out) - expected).abs() < 1e-12, "{} vs {expected}", ring_secs(&out));
}

#[test]
fn bridge_machine_ring_is_0_1_3_2() {
    let t =
        json(&["topo", "import", "--nvidia-smi", &sample("bridge-4gpu.nvidia-smi.txt"), "--ring", "--format", "json"]);
    assert_eq!(t["ring"]["order"], serde_json::json!([0, 1, 3, 2]));
    assert_eq!(t["ring"]["ring_bytes_per_sec"].as_f64().unwrap(), 100e9);
    let md = railyard(&["topo", "import", "--nvidia-smi", &sample("bridge-4gpu.nvidia-smi.txt"), "--ring"]);
    assert!(md.stdout.contains("GPU0 → GPU1 → GPU3 → GPU2"), "{}", md.stdout);
}

#[test]
fn nccl_xml_sample_merges_nvswitch_chips() {
    let out = temp("h200.json");
    json(&["topo", "import", "--nccl-xml", &sample("hgx-h200.nccl-topo.xml"), "-o", &out, "--format", "json"]);
    // 5+5+4+4 NVLinks = 450 GB/s per GPU: the seed's HGX figure.
    let expected = 14.0 * (0.833e-6 + 24.0 * MIB / 450e9);
    assert!((ring_secs(&out) - expected).abs() < 1e-12);
}

#[test]
fn export_and_reimport_keeps_the_plan() {
    let xml = temp("hgx.xml");
    let out = railyard(&["topo", "export", "hgx-h100x2", "-o", &xml]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let back = temp("hgx-back.toml");
    json(&["topo", "import", "--nccl-xml", &xml, "-o", &back, "--format", "json"]);
    let a = json(&["plan", "--algo", "ring,hierarchical", "--format", "json"]);
    let b = json(&["plan", "--topo", &back, "--algo", "ring,hierarchical", "--format", "json"]);
    for i in 0..2 {
        let (x, y) =
            (a["algorithms"][i]["total_secs"].as_f64().unwrap(), b["algorithms"][i]["total_secs"].as_f64().unwrap());
        assert!((x - y).abs() < 1e-12, "{}: {x} vs {y}", a["algorithms"][i]["name"]);
    }
    // Two servers' matrix, repeated: the hierarchical all-reduce beats the ring.
    let two = temp("two.toml");
    json(&[
        "topo",
        "import",
        "--nvidia-smi",
        &sample("dgx-a100.nvidia-smi.txt"),
        "--servers",
        "2",
        "-o",
        &two,
        "--format",
        "json",
    ]);
    let p = json(&["plan", "--topo", &two, "--algo", "ring,hierarchical", "--format", "json"]);
    assert_eq!(p["fastest"], "hierarchical");
}

#[test]
fn malformed_inputs_are_clear_errors() {
    let bad_smi = temp("bad.txt");
    std::fs::write(&bad_smi, "\tGPU0\tGPU1\nGPU0\t X \tNV4\nGPU1\tBOGUS\t X\n").unwrap();
    let out = railyard(&["topo", "import", "--nvidia-smi", &bad_smi]);
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("line 3") && out.stderr.contains("BOGUS"), "{}", out.stderr);
    let bad_xml = temp("bad.xml");
    std::fs::write(&bad_xml, "<system><cpu><pci busid=\"0:1\"><gpu/></pci></cpu></system>").unwrap();
    let out = railyard(&["topo", "import", "--nccl-xml", &bad_xml]);
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("no dev attribute"), "{}", out.stderr);
    let out = railyard(&["topo", "import"]);
    assert_ne!(out.code, 0);
    assert!(!out.stderr.contains("panicked"));
}

/// Hostile imports are refused with a reason, not a stack overflow: XML nested 20,000
/// deep (80 KB), and text that is not a topology at all.
#[test]
fn deeply_nested_xml_is_refused_not_a_crash() {
    let path = temp("deep.xml");
    let xml = format!("<system>{}{}</system>", "<x>".repeat(20_000), "</x>".repeat(20_000));
    std::fs::write(&path, xml).unwrap();
    let out = railyard(&["topo", "import", "--nccl-xml", &path]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("nested 20001 deep") && out.stderr.contains("at most 64"), "{}", out.stderr);
}
