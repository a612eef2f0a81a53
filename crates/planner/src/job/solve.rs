//! `--solve` on a job: the same job on other clusters. How its tokens/s moves with the
//! node count and the NIC rate of its machine preset (and, on a `rail:` fabric, with the
//! size of its NVLink domains at the same GPU count), the fewest nodes, the slowest NIC
//! and the smallest NVLink domain that reach the job's `target_tokens_per_sec`, and which
//! of compute and network the best layout's step is most sensitive to.
//!
//! A changed node count or domain gets a whole layout search (its DP and TP change with
//! it), compared with the best layout railyard finds on today's cluster. A changed NIC
//! rate keeps today's best layout: the GPUs are the same, and the answer is then a floor
//! (a layout searched for the new rate can only be faster) at the cost of one layout, not
//! a search. Searches are cached by topology and bounded by `MAX_SOLVE_SEARCHES`; a
//! question the budget cut short says so.

use std::collections::HashMap;

use serde::Serialize;

use railyard_topology::{LinkClass, Topology};
use railyard_units::units::{format_bytes_per_sec, trim_float};

use super::{evaluate_with, JobInput, JobReport, LayoutSpec, MAX_JOB_GPUS};
use crate::comm::Engine;
use crate::error::PlannerError;

/// The most layout searches one `--solve` of a job runs: today's cluster, 3 node counts
/// and 3 domains for the table, a scan of node counts in powers of two (to 16 times
/// today's, at most 13 more) and one of domains (at most 18 more on `MAX_JOB_GPUS`).
pub const MAX_SOLVE_SEARCHES: usize = 40;
/// The node scan stops at this many times today's node count.
pub const MAX_NODE_MULTIPLE: u64 = 16;

/// NIC rates the NIC question tries, per NIC and direction: 100G to 1.6T Ethernet or
/// InfiniBand ports (12.5 to 200 GB/s).
const NIC_LADDER_BYTES_PER_SEC: [f64; 5] = [12.5e9, 25e9, 50e9, 100e9, 200e9];

/// What a row of the table changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Varied {
    /// The node count (a new layout search).
    Nodes,
    /// The NIC rate (today's best layout kept).
    Nic,
    /// GPUs per NVLink domain at the same GPU count (a new layout search).
    SuperNode,
}

impl Varied {
    pub fn as_str(self) -> &'static str {
        match self {
            Varied::Nodes => "nodes",
            Varied::Nic => "nic",
            Varied::SuperNode => "super-node",
        }
    }
}

/// The unit of a target's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    Nodes,
    GpusPerDomain,
    BytesPerSec,
}

/// The job on one changed cluster.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobPoint {
    pub varied: Varied,
    pub topo: String,
    /// GPUs of the cluster (0 where it could not be built: `note` says why).
    pub gpus: u64,
    /// The best layout there (or today's, for a NIC row), its step and tokens/s; `None`
    /// with `note` when no layout runs the job there.
    pub layout: Option<String>,
    pub step_secs: Option<f64>,
    pub tokens_per_sec: Option<f64>,
    /// Tokens/s against today's: the best layout found on today's cluster for rows that
    /// search, today's best layout for NIC rows.
    pub vs_today: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A target met, or not, and where.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobTarget {
    pub question: String,
    /// The answer in `unit`; `None`: no point tried met it (`detail` says whether the
    /// scan was complete).
    pub value: Option<f64>,
    pub unit: Unit,
    pub detail: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobSolved {
    /// The job's best layout on its own cluster (its own, when the job fixes it).
    pub layout: String,
    pub tokens_per_sec: f64,
    pub step_secs: f64,
    /// The best layout a search finds on today's cluster, where the job fixes another.
    pub searched_layout: Option<String>,
    pub searched_tokens_per_sec: Option<f64>,
    pub points: Vec<JobPoint>,
    pub targets: Vec<JobTarget>,
    /// The best layout's step when its matrix multiplies are 10% faster (compute
    /// efficiency ÷ 0.9, at most 1) and when its NICs are 10% faster (NIC rate ÷ 0.9).
    pub step_with_faster_compute_secs: f64,
    pub step_with_faster_nics_secs: Option<f64>,
    /// What was not asked of this topology, and why.
    pub notes: Vec<String>,
    pub searches: usize,
}

/// A preset spec split into its name and `key=value` items, as the preset parser splits
/// it (`railyard_topology::presets::split_spec`).
struct Spec {
    name: String,
    items: Vec<(String, String)>,
}

impl Spec {
    fn parse(spec: &str) -> Spec {
        let (name, items) = railyard_topology::presets::split_spec(spec);
        let items = items
            .into_iter()
            .filter_map(|item| item.split_once('='))
            .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
            .collect();
        Spec { name: name.to_string(), items }
    }

    fn with(&self, key: &str, value: &str) -> String {
        self.with_all(&[(key, value.to_string())])
    }

    fn with_all(&self, set: &[(&str, String)]) -> String {
        let mut items: Vec<String> = self
            .items
            .iter()
            .filter(|(k, _)| set.iter().all(|(key, _)| k != key))
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        items.extend(set.iter().map(|(k, v)| format!("{k}={v}")));
        format!("{}:{}", self.name, items.join(","))
    }

    /// `rail:` with `gpus` per server and as many servers as keep the GPU count.
    fn with_domain(&self, gpus_per_server: u64, gpus: u64) -> String {
        self.with_all(&[("gpus", gpus_per_server.to_string()), ("servers", (gpus / gpus_per_server).to_string())])
    }

    /// The parameter that counts servers: machine presets' `nodes`, `rail`'s `servers`.
    fn node_key(&self) -> Option<&'static str> {
        match self.name.as_str() {
            "rail" => Some("servers"),
            n if super::gpu::of_topology(n).is_some() => Some("nodes"),
            _ => None,
        }
    }
}

/// The rate of the topology's NIC ports (the fastest NIC-class link), if it has any.
fn nic_bytes_per_sec(t: &Topology) -> Option<f64> {
    t.links.iter().filter(|l| l.class == LinkClass::Nic).map(|l| l.bytes_per_sec).reduce(f64::max)
}

type Load<'a> = &'a dyn Fn(&str) -> Result<std::rc::Rc<Topology>, PlannerError>;

struct Searches<'a> {
    /// The job with its layout searched, and with today's best layout fixed.
    searched: JobInput,
    fixed: JobInput,
    load: Load<'a>,
    engine: Engine,
    left: usize,
    known: HashMap<(Varied, String), JobPoint>,
}

impl Searches<'_> {
    /// The job on `topo`: searched, or for a NIC row on today's best layout. `None`:
    /// the search budget is spent.
    fn point(&mut self, varied: Varied, topo: String) -> Result<Option<JobPoint>, PlannerError> {
        let key_varied = if varied == Varied::Nic { Varied::Nic } else { Varied::Nodes };
        if let Some(p) = self.known.get(&(key_varied, topo.clone())) {
            return Ok(Some(JobPoint { varied, ..p.clone() }));
        }
        if varied != Varied::Nic {
            if self.left == 0 {
                return Ok(None);
            }
            self.left -= 1;
        }
        let mut point = JobPoint {
            varied,
            topo,
            gpus: 0,
            layout: None,
            step_secs: None,
            tokens_per_sec: None,
            vs_today: None,
            note: None,
        };
        let topology = match (self.load)(&point.topo) {
            Ok(t) => t,
            Err(e) => {
                point.note = Some(e.to_string());
                return Ok(Some(point));
            }
        };
        point.gpus = topology.default_ranks.len() as u64;
        if point.gpus > MAX_JOB_GPUS {
            point.note = Some(format!("more than the {MAX_JOB_GPUS} GPUs a job plans"));
            return Ok(Some(point));
        }
        let base = if varied == Varied::Nic { &self.fixed } else { &self.searched };
        let input = JobInput { topo: point.topo.clone(), ..base.clone() };
        match evaluate_with(&input, &topology, true, self.engine) {
            Ok(report) => {
                if let Some((layout, step)) = best(&report) {
                    point.layout = Some(layout);
                    point.step_secs = Some(step.0);
                    point.tokens_per_sec = Some(step.1);
                }
            }
            // A cluster where the job has no layout (too few GPUs for its memory, a
            // batch the GPUs do not divide) is an answer, not a failure of the solve.
            Err(PlannerError::BadInput { message, .. }) => point.note = Some(message),
            Err(e) => return Err(e),
        }
        self.known.insert((key_varied, point.topo.clone()), point.clone());
        Ok(Some(point))
    }
}

fn best(report: &JobReport) -> Option<(String, (f64, f64))> {
    let e = report.ranked.first()?;
    let s = e.step.as_ref()?;
    Some((e.layout.to_string(), (s.step_secs, s.tokens_per_sec)))
}

/// One question's scan: candidates in the order tried (ascending cost), the first whose
/// point reaches `target` answers it.
struct Scan<'q> {
    question: String,
    unit: Unit,
    varied: Varied,
    candidates: Vec<(f64, String)>,
    words: &'q dyn Fn(f64) -> String,
}

fn first_reaching(s: &mut Searches, scan: Scan, target: f64) -> Result<JobTarget, PlannerError> {
    let Scan { question, unit, varied, candidates, words } = scan;
    let mut best: Option<(f64, String)> = None;
    let mut previous: Option<String> = None;
    for (value, topo) in &candidates {
        let Some(p) = s.point(varied, topo.clone())? else {
            let most =
                best.map_or("nothing ran".to_string(), |(t, at)| format!("{} tokens/s on {at}", trim_float(t, 6)));
            return Ok(JobTarget {
                question,
                value: None,
                unit,
                detail: format!(
                    "not searched from {} on: the {MAX_SOLVE_SEARCHES} layout searches of one --solve are spent; \
                     the most so far: {most}",
                    words(*value)
                ),
            });
        };
        let Some(t) = p.tokens_per_sec else { continue };
        let layout = p.layout.clone().unwrap_or_default();
        if t >= target {
            let before = previous.map_or_else(|| "the first tried".to_string(), |b| format!("{b} does not reach it"));
            return Ok(JobTarget {
                question,
                value: Some(*value),
                unit,
                detail: format!("{}: {layout}, {} tokens/s; {before}", p.topo, trim_float(t, 6)),
            });
        }
        previous = Some(format!("{} ({} tokens/s)", words(*value), trim_float(t, 6)));
        if best.as_ref().is_none_or(|(b, _)| t > *b) {
            best = Some((t, p.topo.clone()));
        }
    }
    let (first, last) = match (candidates.first(), candidates.last()) {
        (Some(f), Some(l)) => (words(f.0), words(l.0)),
        _ => return Ok(JobTarget { question, value: None, unit, detail: "nothing to try".into() }),
    };
    let most = best.map_or("no layout ran".to_string(), |(t, at)| format!("{} tokens/s on {at}", trim_float(t, 6)));
    Ok(JobTarget {
        question,
        value: None,
        unit,
        detail: format!("not reached from {first} to {last}; the most: {most}"),
    })
}

/// A preset's `nic=` value in decimal GB/s.
fn gbs(bytes_per_sec: f64) -> String {
    format!("{}GB/s", trim_float(bytes_per_sec / 1e9, 6))
}

/// Ascending, without repeats.
fn ascending(mut v: Vec<u64>) -> Vec<u64> {
    v.sort_unstable();
    v.dedup();
    v
}

/// `--solve` for `input`, whose own report is `report`, every layout timed by `engine`.
/// `load` builds (or reuses) a topology from its spec.
pub fn solve(
    input: &JobInput,
    report: &JobReport,
    load: Load,
    engine: Engine,
) -> Result<Option<JobSolved>, PlannerError> {
    let Some((layout, (step_secs, tokens_per_sec))) = best(report) else { return Ok(None) };
    let spec = Spec::parse(&input.topo);
    let own = load(&input.topo)?;
    let nodes = own.gpu_servers().max(1) as u64;
    let gpus = own.default_ranks.len() as u64;
    let per_node = gpus / nodes;
    let nic = nic_bytes_per_sec(&own);
    let searched = JobInput { layout: LayoutSpec::Search("search".into()), ..input.clone() };
    let fixed = JobInput { layout: LayoutSpec::Fixed(report.ranked[0].layout.as_input()), ..input.clone() };
    let mut s = Searches { searched, fixed, load, engine, left: MAX_SOLVE_SEARCHES, known: HashMap::new() };
    let today_fixed = JobPoint {
        varied: Varied::Nic,
        topo: input.topo.clone(),
        gpus,
        layout: Some(layout.clone()),
        step_secs: Some(step_secs),
        tokens_per_sec: Some(tokens_per_sec),
        vs_today: Some(1.0),
        note: None,
    };
    s.known.insert((Varied::Nic, input.topo.clone()), today_fixed.clone());
    let searched_today = match input.layout {
        LayoutSpec::Search(_) => {
            s.known.insert((Varied::Nodes, input.topo.clone()), JobPoint { varied: Varied::Nodes, ..today_fixed });
            None
        }
        LayoutSpec::Fixed(_) => s.point(Varied::Nodes, input.topo.clone())?,
    };
    let searched_tokens = searched_today.as_ref().and_then(|p| p.tokens_per_sec).unwrap_or(tokens_per_sec);
    let mut out = JobSolved {
        layout: layout.clone(),
        tokens_per_sec,
        step_secs,
        searched_layout: searched_today.as_ref().and_then(|p| p.layout.clone()),
        searched_tokens_per_sec: searched_today.as_ref().and_then(|p| p.tokens_per_sec),
        points: Vec::new(),
        targets: Vec::new(),
        step_with_faster_compute_secs: step_secs,
        step_with_faster_nics_secs: None,
        notes: Vec::new(),
        searches: 0,
    };
    let node_key = spec.node_key();
    let most_nodes = MAX_JOB_GPUS / per_node.max(1);
    let push = |out: &mut JobSolved, p: Option<JobPoint>| {
        if let Some(mut p) = p {
            let base = if p.varied == Varied::Nic { tokens_per_sec } else { searched_tokens };
            p.vs_today = p.tokens_per_sec.map(|t| t / base);
            out.points.push(p);
        }
    };
    match node_key {
        Some(key) => {
            for n in [nodes / 2, nodes * 2, nodes * 4] {
                if n >= 1 && n <= most_nodes {
                    let p = s.point(Varied::Nodes, spec.with(key, &n.to_string()))?;
                    push(&mut out, p);
                } else if n > most_nodes {
                    out.notes.push(format!("{n} nodes: more than the {MAX_JOB_GPUS} GPUs a job plans"));
                }
            }
        }
        None => out.notes.push(format!(
            "{}: node counts, NICs and domains are varied on machine presets (dgx-h100:nodes=N …) and rail:servers=N",
            input.topo
        )),
    }
    let nic_rows = match (nic, node_key) {
        (Some(_), Some(_)) if nodes == 1 => {
            out.notes.push("one node: its NICs carry none of the job's traffic, so their rate is not varied".into());
            None
        }
        (Some(rate), Some(_)) => Some(rate),
        _ => None,
    };
    if let Some(rate) = nic_rows {
        for f in [0.5, 2.0] {
            let p = s.point(Varied::Nic, spec.with("nic", &gbs(rate * f)))?;
            push(&mut out, p);
        }
    }
    // A rail fabric's NVLink domain is a parameter; a machine's is the machine.
    if spec.name == "rail" {
        for g in [per_node / 2, per_node * 2, per_node * 4] {
            if g >= 1 && g <= gpus && gpus.is_multiple_of(g) {
                let p = s.point(Varied::SuperNode, spec.with_domain(g, gpus))?;
                push(&mut out, p);
            }
        }
    }
    if let Some(target) = input.target_tokens_per_sec {
        let target_words = trim_float(target, 6);
        if let Some(key) = node_key {
            let top = (nodes * MAX_NODE_MULTIPLE).min(most_nodes);
            let mut counts: Vec<u64> = (0..64).map(|k| 1u64 << k).take_while(|&n| n <= top).collect();
            counts.push(nodes);
            let candidates =
                ascending(counts).into_iter().map(|n| (n as f64, spec.with(key, &n.to_string()))).collect();
            let words = |n: f64| format!("{n} nodes ({} GPUs)", n as u64 * per_node);
            let scan = Scan {
                question: format!("fewest nodes for {target_words} tokens/s"),
                unit: Unit::Nodes,
                varied: Varied::Nodes,
                candidates,
                words: &words,
            };
            out.targets.push(first_reaching(&mut s, scan, target)?);
        }
        if let Some(rate) = nic_rows {
            let mut rates: Vec<f64> = NIC_LADDER_BYTES_PER_SEC.to_vec();
            if !rates.contains(&rate) {
                rates.push(rate);
                rates.sort_by(f64::total_cmp);
            }
            let candidates = rates.into_iter().map(|r| (r, spec.with("nic", &gbs(r)))).collect();
            let words = |r: f64| format!("{} NICs", format_bytes_per_sec(r));
            let scan = Scan {
                question: format!("slowest NIC for {target_words} tokens/s with today's layout"),
                unit: Unit::BytesPerSec,
                varied: Varied::Nic,
                candidates,
                words: &words,
            };
            out.targets.push(first_reaching(&mut s, scan, target)?);
        }
        if spec.name == "rail" {
            let domains = (0..64).map(|k| 1u64 << k).take_while(|&g| g <= gpus).filter(|&g| gpus.is_multiple_of(g));
            let candidates = ascending(domains.chain([per_node]).collect())
                .into_iter()
                .map(|g| (g as f64, spec.with_domain(g, gpus)))
                .collect();
            let words = |g: f64| format!("{g} GPUs per domain");
            let scan = Scan {
                question: format!("smallest NVLink domain for {target_words} tokens/s on these GPUs"),
                unit: Unit::GpusPerDomain,
                varied: Varied::SuperNode,
                candidates,
                words: &words,
            };
            out.targets.push(first_reaching(&mut s, scan, target)?);
        }
    } else {
        out.notes.push(
            "give the job target_tokens_per_sec to ask for the fewest nodes and slowest NIC that reach it".into(),
        );
    }
    // Sensitivity of the best layout, fixed: only the input moves.
    let efficiency = report.compute_efficiency / 0.9;
    if efficiency > 1.0 {
        out.notes.push("compute efficiency capped at 1: matrix multiplies less than 10% faster".into());
    }
    let faster = JobInput { compute_efficiency: Some(efficiency.min(1.0)), ..s.fixed.clone() };
    if let Some((_, (secs, _))) = best(&evaluate_with(&faster, &own, true, engine)?) {
        out.step_with_faster_compute_secs = secs;
    }
    if let Some(rate) = nic_rows {
        let p = s.point(Varied::Nic, spec.with("nic", &gbs(rate / 0.9)))?;
        out.step_with_faster_nics_secs = p.and_then(|p| p.step_secs);
    }
    out.searches = MAX_SOLVE_SEARCHES - s.left;
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;

    use super::super::{evaluate, JobInput};
    use super::{first_reaching, solve, Engine, Scan, Searches, Spec, Unit, Varied};
    use crate::error::PlannerError;

    fn load(spec: &str) -> Result<Rc<railyard_topology::Topology>, PlannerError> {
        railyard_topology::load(spec)
            .map(Rc::new)
            .map_err(|cause| PlannerError::Topology { field: "job.topo".into(), cause })
    }

    fn job(topo: &str, target: Option<f64>) -> JobInput {
        let mut text = format!("model = \"llama3-8b\"\ntopo = \"{topo}\"\nglobal_batch = 64\nlayout = \"search\"\n");
        if let Some(t) = target {
            text += &format!("target_tokens_per_sec = {t}\n");
        }
        toml::from_str(&text).unwrap()
    }

    /// The fewest nodes for a target is the first power of two whose own search reaches
    /// it: aim at what 4 nodes reach and 4 nodes (32 GPUs) is the answer, and the table
    /// holds that point with the same tokens/s.
    #[test]
    fn the_fewest_nodes_reach_the_target_and_half_as_many_do_not() {
        let four = evaluate(&job("dgx-h100:nodes=4", None), &load("dgx-h100:nodes=4").unwrap()).unwrap();
        let reach = four.ranked[0].step.as_ref().unwrap().tokens_per_sec;
        let input = job("dgx-h100:nodes=2", Some(reach));
        let own = evaluate(&input, &load("dgx-h100:nodes=2").unwrap()).unwrap();
        let solved = solve(&input, &own, &load, Engine::Model).unwrap().unwrap();
        let fewest = &solved.targets[0];
        assert_eq!(fewest.value, Some(4.0), "{fewest:?}");
        let four_point = solved.points.iter().find(|p| p.topo == "dgx-h100:nodes=4").unwrap();
        assert_eq!(four_point.tokens_per_sec, Some(reach));
        let one = solved.points.iter().find(|p| p.topo == "dgx-h100:nodes=1").unwrap();
        assert!(one.tokens_per_sec.unwrap() < reach);
        // Faster matrix multiplies shorten the step; the network's share is what NICs can.
        assert!(solved.step_with_faster_compute_secs < solved.step_secs);
        assert!(solved.step_with_faster_nics_secs.unwrap() <= solved.step_secs);
    }

    /// On a rail fabric the NVLink domain is varied at the same GPU count.
    #[test]
    fn a_rail_fabric_varies_its_nvlink_domain() {
        let topo = "rail:servers=2,gpus=8";
        let mut twice = job("rail:servers=4,gpus=8", None);
        twice.gpu = Some("h100".into());
        let twice = evaluate(&twice, &load("rail:servers=4,gpus=8").unwrap()).unwrap();
        // Only twice the GPUs reach twice the GPUs' tokens/s.
        let reach = twice.ranked[0].step.as_ref().unwrap().tokens_per_sec;
        let mut input = job(topo, Some(reach));
        input.gpu = Some("h100".into());
        let own = evaluate(&input, &load(topo).unwrap()).unwrap();
        let solved = solve(&input, &own, &load, Engine::Model).unwrap().unwrap();
        let domains: Vec<&str> =
            solved.points.iter().filter(|p| p.varied == Varied::SuperNode).map(|p| p.topo.as_str()).collect();
        assert_eq!(domains, ["rail:gpus=4,servers=4", "rail:gpus=16,servers=1"]);
        assert!(solved.points.iter().filter(|p| p.varied == Varied::SuperNode).all(|p| p.gpus == 16));
        assert_eq!(solved.targets[0].value, Some(4.0), "{:?}", solved.targets);
        // Not on these 16 GPUs: the NIC and domain questions say none, with the most found.
        assert!(
            solved.targets[1..].iter().all(|t| t.value.is_none() && t.detail.contains("the most")),
            "{:?}",
            solved.targets
        );
    }

    /// A topology file has no node count, NIC rate or domain to vary: said, not guessed.
    #[test]
    fn a_file_is_not_varied() {
        let topo = concat!(env!("CARGO_MANIFEST_DIR"), "/../../topologies/two-node-cluster.toml");
        let mut input = job(topo, Some(1e9));
        input.gpu = Some("h100".into());
        let own = evaluate(&input, &load(topo).unwrap()).unwrap();
        let solved = solve(&input, &own, &load, Engine::Model).unwrap().unwrap();
        assert!(solved.points.is_empty());
        assert!(solved.notes.iter().any(|n| n.contains("machine presets")), "{:?}", solved.notes);
        assert!(solved.targets.is_empty(), "{:?}", solved.targets);
    }

    #[test]
    fn a_spec_changes_one_parameter() {
        let s = Spec::parse("dgx-h100:nodes=4,fabric=roce");
        assert_eq!(s.with("nodes", "8"), "dgx-h100:fabric=roce,nodes=8");
        assert_eq!(s.node_key(), Some("nodes"));
        let s = Spec::parse("rail:servers=2,over=3:1");
        assert_eq!(s.with("nic", "25GB/s"), "rail:servers=2,over=3:1,nic=25GB/s");
        assert_eq!(s.node_key(), Some("servers"));
        assert_eq!(Spec::parse("my-cluster.toml").node_key(), None);
    }

    fn searches(left: usize) -> Searches<'static> {
        let input: JobInput = toml::from_str(
            "model = \"llama3-8b\"\ntopo = \"dgx-h100:nodes=1\"\nglobal_batch = 64\nlayout = \"search\"\n",
        )
        .unwrap();
        Searches {
            searched: input.clone(),
            fixed: input,
            load: &load,
            engine: Engine::Model,
            left,
            known: Default::default(),
        }
    }

    fn scan(words: &dyn Fn(f64) -> String) -> Scan<'_> {
        Scan {
            question: "q".into(),
            unit: Unit::Nodes,
            varied: Varied::Nodes,
            candidates: [1u64, 2, 4].iter().map(|&n| (n as f64, format!("dgx-h100:nodes={n}"))).collect(),
            words,
        }
    }

    /// Unreached, the answer names the most any point reached, not the last point's.
    #[test]
    fn an_unreached_target_reports_the_best_point() {
        let words = |n: f64| format!("{n} nodes");
        let mut s = searches(10);
        let t = first_reaching(&mut s, scan(&words), 1e15).unwrap();
        assert_eq!(t.value, None);
        let most: Vec<f64> = ["dgx-h100:nodes=1", "dgx-h100:nodes=2", "dgx-h100:nodes=4"]
            .iter()
            .filter_map(|topo| s.known.get(&(Varied::Nodes, topo.to_string())).and_then(|p| p.tokens_per_sec))
            .collect();
        let best = most.iter().copied().fold(0.0, f64::max);
        assert!(t.detail.contains(&railyard_units::units::trim_float(best, 6)), "{} vs {most:?}", t.detail);
    }

    /// A spent budget is said, not reported as "not reached".
    #[test]
    fn a_spent_budget_is_not_an_answer() {
        let words = |n: f64| format!("{n} nodes");
        let mut s = searches(1);
        let t = first_reaching(&mut s, scan(&words), 1e15).unwrap();
        assert_eq!(t.value, None);
        assert!(t.detail.starts_with("not searched from 2 nodes on"), "{}", t.detail);
    }
}
