//! Output in the user's words: default outputs carry no CJK characters (the sources'
//! terms are translated where they are printed).

mod common;
use common::railyard;

fn cjk(text: &str) -> Option<char> {
    text.chars().find(|c| ('\u{4e00}'..='\u{9fff}').contains(c) || ('\u{3400}'..='\u{4dbf}').contains(c))
}

#[test]
fn default_outputs_have_no_cjk_characters() {
    for args in [
        vec!["plan"],
        vec!["plan-training"],
        vec!["plan-training", "--examples"],
        vec!["topo", "list"],
        vec!["topo", "show", "a100-pcie-control"],
        vec!["sim"],
        vec!["model", "message"],
        vec!["model", "ep-dispatch"],
    ] {
        let out = railyard(&args);
        assert_eq!(out.code, 0, "{args:?}: {}", out.stderr);
        if let Some(c) = cjk(&out.stdout) {
            panic!("{args:?} prints {c:?}");
        }
    }
}
