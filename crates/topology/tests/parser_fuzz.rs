//! Fuzzing the importers with proptest: random text and mutated real samples must give a
//! topology or an error, never a panic, a hang or a huge allocation. CI runs a few hundred
//! cases; a long run sets RAILYARD_FUZZ_CASES (the 10-minute run is in docs/fuzzing.md).
//! Failures proptest finds are kept in proptest-regressions/ and replayed on every run.

use proptest::prelude::*;
use railyard_topology::file::{self, FileFormat};
use railyard_topology::import::{nccl_xml, nvidia_smi, LinkDefaults};

const SMI: &str = include_str!("../../../topologies/samples/dgx-a100.nvidia-smi.txt");
const BRIDGE: &str = include_str!("../../../topologies/samples/bridge-4gpu.nvidia-smi.txt");
const XML: &str = include_str!("../../../topologies/samples/hgx-h200.nccl-topo.xml");
const TOML: &str = include_str!("../../../topologies/a100-pcie-control.toml");

fn cases() -> u32 {
    std::env::var("RAILYARD_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(256)
}

/// Apply byte-level mutations: delete, duplicate or overwrite spans, splice tokens.
fn mutate(text: &str, edits: &[(usize, usize, u8)]) -> String {
    let mut bytes = text.as_bytes().to_vec();
    let tokens: [&[u8]; 12] = [
        b"NV",
        b"X",
        b"SYS",
        b"<pci",
        b"</pci>",
        b"count=\"",
        b"99999999999",
        b"-1",
        b"\t",
        b"\n",
        b"GPU0",
        b"\"0x068000\"",
    ];
    for &(at, len, op) in edits {
        if bytes.is_empty() {
            break;
        }
        let at = at % bytes.len();
        let end = (at + len % 64).min(bytes.len());
        match op % 4 {
            0 => {
                bytes.drain(at..end);
            }
            1 => {
                let span = bytes[at..end].to_vec();
                bytes.splice(at..at, span);
            }
            2 => {
                for b in &mut bytes[at..end] {
                    *b = b.wrapping_add(op);
                }
            }
            _ => {
                bytes.splice(at..at, tokens[op as usize % tokens.len()].iter().copied());
            }
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

fn all_parsers(text: &str) {
    let d = LinkDefaults::default();
    let _ = nvidia_smi::import(text, "fuzz", 1, &d);
    let _ = nvidia_smi::import(text, "fuzz", 3, &d);
    let _ = nccl_xml::import(text, "fuzz", &d);
    let _ = file::parse(text, FileFormat::Toml, "fuzz");
    let _ = file::parse(text, FileFormat::Json, "fuzz");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn garbage_never_panics(text in ".{0,2000}") {
        all_parsers(&text);
    }

    #[test]
    fn mutated_samples_never_panic(which in 0usize..4, edits in prop::collection::vec((any::<usize>(), any::<usize>(), any::<u8>()), 1..12)) {
        let base = [SMI, BRIDGE, XML, TOML][which];
        all_parsers(&mutate(base, &edits));
    }

    /// Nesting far past the limit (20,000 deep once overflowed the stack) and numbers
    /// from 0 to u64::MAX where the samples have counts, lane widths, speeds and servers.
    #[test]
    fn deep_nesting_and_huge_counts_are_errors_not_crashes(
        depth in 0usize..30_000,
        tag in prop::sample::select(vec!["x", "pci", "cpu", "gpu", "system"]),
        number in prop_oneof![any::<u64>().prop_map(|n| n.to_string()), Just("NaN".to_string()), Just("1e308".to_string()), Just("-0".to_string())],
        servers in any::<usize>(),
    ) {
        let d = LinkDefaults::default();
        let deep = format!("<system version=\"1\">{}{}</system>", format!("<{tag}>").repeat(depth), format!("</{tag}>").repeat(depth));
        let result = nccl_xml::import(&deep, "deep", &d);
        if depth > 64 {
            prop_assert!(result.unwrap_err().to_string().contains("nests at most 64"));
        }
        for attr in ["count=\"", "link_width=\"", "speed=\"", "dev=\""] {
            let mut text = String::new();
            let mut rest = XML;
            while let Some(at) = rest.find(attr) {
                let value_end = rest[at + attr.len()..].find('"').map_or(rest.len(), |e| at + attr.len() + e);
                text.push_str(&rest[..at + attr.len()]);
                text.push_str(&number);
                rest = &rest[value_end..];
            }
            text.push_str(rest);
            if let Ok(t) = nccl_xml::import(&text, "huge", &d) {
                prop_assert!(t.links.iter().all(|l| l.bytes_per_sec.is_finite() && l.bytes_per_sec >= 1.0));
            }
        }
        let smi = nvidia_smi::import(SMI, "many", servers, &d);
        prop_assert_eq!(smi.is_ok(), (1..=64).contains(&servers));
    }

    #[test]
    fn matrices_of_random_cells_never_panic(n in 1usize..12, cells in prop::collection::vec(0usize..10, 144)) {
        let names = ["X", "NV1", "NV12", "PIX", "PXB", "PHB", "NODE", "SYS", "NV0", "ZZ"];
        let mut text = String::from("\t");
        text.push_str(&(0..n).map(|i| format!("GPU{i}")).collect::<Vec<_>>().join("\t"));
        text.push('\n');
        for r in 0..n {
            text.push_str(&format!("GPU{r}"));
            for c in 0..n {
                text.push('\t');
                text.push_str(if r == c { "X" } else { names[cells[(r.min(c)) * 12 + r.max(c)]] });
            }
            text.push('\n');
        }
        match nvidia_smi::import(&text, "m", 1, &LinkDefaults::default()) {
            Ok(t) => prop_assert_eq!(t.gpus().len(), n),
            Err(e) => prop_assert!(!e.to_string().is_empty()),
        }
    }
}

#[test]
fn the_samples_import() {
    let d = LinkDefaults::default();
    assert_eq!(nvidia_smi::import(SMI, "a", 1, &d).unwrap().gpus().len(), 8);
    assert_eq!(nvidia_smi::import(BRIDGE, "b", 1, &d).unwrap().gpus().len(), 4);
    assert_eq!(nccl_xml::import(XML, "c", &d).unwrap().gpus().len(), 8);
}
