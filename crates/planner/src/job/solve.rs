//! `--solve` on a job: the same job on other clusters. How its best layout's tokens/s
//! moves with the node count and the NIC rate of its machine preset (and, on a `rail:`
//! fabric, with the size of its NVLink domains at the same GPU count), the fewest nodes
//! (a power of two), the slowest NIC and the smallest NVLink domain that reach the
//! job's `target_tokens_per_sec`, and which of compute and network the best layout's
//! step is most sensitive to.
//!
//! Each point is a whole layout search on the changed preset (`evaluate`), so a point
//! answers with the layout that is best there, not today's layout stretched; the
//! searches are bounded by `MAX_SOLVE_SEARCHES`.

use serde::Serialize;

use railyard_topology::{LinkClass, Topology};
use railyard_units::units::{format_bytes_per_sec, trim_float};

use super::{evaluate, JobInput, JobReport, LayoutSpec, MAX_JOB_GPUS};
use crate::error::PlannerError;

/// The most layout searches one `--solve` of a job runs (a scan of node counts in powers
/// of two to `MAX_JOB_GPUS` needs 16; the table and the NIC ladder need 7 more).
pub const MAX_SOLVE_SEARCHES: usize = 32;

/// NIC rates the NIC question tries, per NIC and direction: 100G to 1.6T Ethernet or
/// InfiniBand ports (12.5 to 200 GB/s).
const NIC_LADDER_BYTES_PER_SEC: [f64; 5] = [12.5e9, 25e9, 50e9, 100e9, 200e9];

/// The job on one changed cluster.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobPoint {
    /// What was changed: "nodes", "nic" or "super-node" (GPUs per NVLink domain).
    pub varied: &'static str,
    pub topo: String,
    pub gpus: u64,
    /// The best layout there, its step and tokens/s; `None` with `note` when no layout
    /// runs the job there.
    pub layout: Option<String>,
    pub step_secs: Option<f64>,
    pub tokens_per_sec: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A target met, or not, and where.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobTarget {
    pub question: String,
    /// The answer (GPUs, or a NIC rate in bytes per second); `None`: no point tried met it.
    pub value: Option<f64>,
    pub unit: &'static str,
    pub detail: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobSolved {
    /// The job's best layout on its own cluster.
    pub layout: String,
    pub tokens_per_sec: f64,
    pub step_secs: f64,
    pub points: Vec<JobPoint>,
    pub targets: Vec<JobTarget>,
    /// The best layout's step when its matrix multiplies are 10% faster (compute
    /// efficiency ÷ 0.9) and when its NICs are 10% faster (NIC rate ÷ 0.9).
    pub step_with_faster_compute_secs: f64,
    pub step_with_faster_nics_secs: Option<f64>,
    /// Why a question could not be asked of this topology (a file, or a preset without
    /// node or NIC parameters).
    pub notes: Vec<String>,
}

/// A preset spec split into its name and `key=value` items (`over=3:1` holds a colon,
/// so items are split on commas first, as the preset parser does).
struct Spec {
    name: String,
    items: Vec<(String, String)>,
}

impl Spec {
    fn parse(spec: &str) -> Spec {
        let (name, rest) = spec.split_once(':').unwrap_or((spec, ""));
        let items = rest
            .split(',')
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

struct Searches<'a> {
    input: JobInput,
    load: &'a dyn Fn(&str) -> Result<std::rc::Rc<Topology>, PlannerError>,
    left: usize,
}

impl Searches<'_> {
    /// The job's best layout on `topo`: a point, or why none runs there.
    fn point(&mut self, varied: &'static str, topo: String) -> Result<JobPoint, PlannerError> {
        let mut point =
            JobPoint { varied, topo, gpus: 0, layout: None, step_secs: None, tokens_per_sec: None, note: None };
        if self.left == 0 {
            point.note = Some(format!("not searched: {MAX_SOLVE_SEARCHES} layout searches already run"));
            return Ok(point);
        }
        self.left -= 1;
        let topology = match (self.load)(&point.topo) {
            Ok(t) => t,
            Err(e) => {
                point.note = Some(e.to_string());
                return Ok(point);
            }
        };
        point.gpus = topology.default_ranks.len() as u64;
        if point.gpus > MAX_JOB_GPUS {
            point.note = Some(format!("more than the {MAX_JOB_GPUS} GPUs a job plans"));
            return Ok(point);
        }
        let input = JobInput { topo: point.topo.clone(), ..self.input.clone() };
        match evaluate(&input, &topology) {
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
        Ok(point)
    }
}

fn best(report: &JobReport) -> Option<(String, (f64, f64))> {
    let e = report.ranked.first()?;
    let s = e.step.as_ref()?;
    Some((e.layout.to_string(), (s.step_secs, s.tokens_per_sec)))
}

/// `--solve` for `input`, whose own report is `report`. `load` builds (or reuses) a
/// topology from its spec.
pub fn solve(
    input: &JobInput,
    report: &JobReport,
    load: &dyn Fn(&str) -> Result<std::rc::Rc<Topology>, PlannerError>,
) -> Result<Option<JobSolved>, PlannerError> {
    let Some((layout, (step_secs, tokens_per_sec))) = best(report) else { return Ok(None) };
    let spec = Spec::parse(&input.topo);
    let own = load(&input.topo)?;
    let gpus_per_node = {
        let servers = own.gpu_servers().max(1);
        own.default_ranks.len() / servers
    };
    let nodes = own.gpu_servers() as u64;
    let nic = nic_bytes_per_sec(&own);
    // Other clusters get a fresh layout search: a fixed layout's DP would not fit them.
    let search = JobInput { layout: LayoutSpec::Search("search".into()), ..input.clone() };
    let mut s = Searches { input: search, load, left: MAX_SOLVE_SEARCHES };
    let mut out = JobSolved {
        layout: layout.clone(),
        tokens_per_sec,
        step_secs,
        points: Vec::new(),
        targets: Vec::new(),
        step_with_faster_compute_secs: step_secs,
        step_with_faster_nics_secs: None,
        notes: Vec::new(),
    };
    let node_key = spec.node_key();
    match node_key {
        Some(key) => {
            for n in [nodes / 2, nodes * 2, nodes * 4] {
                if n >= 1 && n != nodes && n * gpus_per_node as u64 <= MAX_JOB_GPUS {
                    let p = s.point("nodes", spec.with(key, &n.to_string()))?;
                    out.points.push(p);
                }
            }
        }
        None => out.notes.push(format!(
            "{}: node counts are varied on machine presets (dgx-h100:nodes=N …) and rail:servers=N only",
            input.topo
        )),
    }
    match nic {
        Some(rate) if node_key.is_some() => {
            for f in [0.5, 2.0] {
                let p = s.point("nic", spec.with("nic", &gbs(rate * f)))?;
                out.points.push(p);
            }
        }
        _ => out.notes.push(format!("{}: the NIC rate is varied on machine and rail presets only", input.topo)),
    }
    // A rail fabric's NVLink domain is a parameter; a machine's is the machine.
    let gpus = own.default_ranks.len() as u64;
    let domain = gpus_per_node as u64;
    if spec.name == "rail" {
        for g in [domain / 2, domain * 2, domain * 4] {
            if g >= 1 && g <= gpus && gpus.is_multiple_of(g) {
                let p = s.point("super-node", spec.with_domain(g, gpus))?;
                out.points.push(p);
            }
        }
    }
    if let Some(target) = input.target_tokens_per_sec {
        out.targets.push(fewest_nodes(&mut s, &spec, node_key, gpus_per_node as u64, target)?);
        if nic.is_some() && node_key.is_some() {
            out.targets.push(slowest_nic(&mut s, &spec, &input.topo, target)?);
        }
        if spec.name == "rail" {
            out.targets.push(smallest_domain(&mut s, &spec, gpus, target)?);
        }
    }
    // Sensitivity of the best layout, fixed: only the input moves.
    let fixed = JobInput { layout: LayoutSpec::Fixed(report.ranked[0].layout.as_input()), ..input.clone() };
    let faster = JobInput { compute_efficiency: Some((report.compute_efficiency / 0.9).min(1.0)), ..fixed.clone() };
    if let Some((_, (secs, _))) = best(&evaluate(&faster, &own)?) {
        out.step_with_faster_compute_secs = secs;
    }
    if let (Some(rate), Some(_)) = (nic, node_key) {
        let topo = spec.with("nic", &gbs(rate / 0.9));
        let t = load(&topo)?;
        let faster = JobInput { topo, ..fixed };
        out.step_with_faster_nics_secs = best(&evaluate(&faster, &t)?).map(|(_, (secs, _))| secs);
    }
    Ok(Some(out))
}

/// A preset's `nic=` value in decimal GB/s.
fn gbs(bytes_per_sec: f64) -> String {
    format!("{}GB/s", trim_float(bytes_per_sec / 1e9, 6))
}

/// The fewest nodes, in powers of two, whose best layout reaches `target` tokens/s.
fn fewest_nodes(
    s: &mut Searches,
    spec: &Spec,
    node_key: Option<&str>,
    gpus_per_node: u64,
    target: f64,
) -> Result<JobTarget, PlannerError> {
    let question = format!("fewest nodes for {} tokens/s", trim_float(target, 6));
    let Some(key) = node_key else {
        return Ok(JobTarget {
            question,
            value: None,
            unit: "GPUs",
            detail: "a machine preset or rail: topology is needed to vary the node count".into(),
        });
    };
    let mut n = 1u64;
    let mut last = String::from("none tried");
    while n * gpus_per_node <= MAX_JOB_GPUS {
        let p = s.point("nodes", spec.with(key, &n.to_string()))?;
        if let (Some(t), Some(layout)) = (p.tokens_per_sec, &p.layout) {
            if t >= target {
                return Ok(JobTarget {
                    question,
                    value: Some(p.gpus as f64),
                    unit: "GPUs",
                    detail: format!(
                        "{}: {layout}, {} tokens/s (half as many nodes do not reach it)",
                        p.topo,
                        trim_float(t, 6)
                    ),
                });
            }
            last = format!("{} tokens/s on {}", trim_float(t, 6), p.topo);
        }
        if p.note.as_deref().is_some_and(|n| n.starts_with("not searched")) {
            break;
        }
        n *= 2;
    }
    Ok(JobTarget { question, value: None, unit: "GPUs", detail: format!("not reached; the most: {last}") })
}

/// The smallest NVLink domain (GPUs per server, powers of two dividing the GPU count)
/// with which the job's GPUs reach `target`.
fn smallest_domain(s: &mut Searches, spec: &Spec, gpus: u64, target: f64) -> Result<JobTarget, PlannerError> {
    let question = format!("smallest NVLink domain for {} tokens/s on these GPUs", trim_float(target, 6));
    let mut last = String::from("none tried");
    let mut g = 1u64;
    while g <= gpus && gpus.is_multiple_of(g) {
        let p = s.point("super-node", spec.with_domain(g, gpus))?;
        if let (Some(t), Some(layout)) = (p.tokens_per_sec, &p.layout) {
            if t >= target {
                return Ok(JobTarget {
                    question,
                    value: Some(g as f64),
                    unit: "GPUs",
                    detail: format!("{}: {layout}, {} tokens/s", p.topo, trim_float(t, 6)),
                });
            }
            last = format!("{} tokens/s on {}", trim_float(t, 6), p.topo);
        }
        g *= 2;
    }
    Ok(JobTarget { question, value: None, unit: "GPUs", detail: format!("not reached; the most: {last}") })
}

/// The slowest NIC of the ladder with which the job's own node count reaches `target`.
fn slowest_nic(s: &mut Searches, spec: &Spec, topo: &str, target: f64) -> Result<JobTarget, PlannerError> {
    let question = format!("slowest NIC for {} tokens/s on these GPUs", trim_float(target, 6));
    let mut last = String::from("none tried");
    for rate in NIC_LADDER_BYTES_PER_SEC {
        let p = s.point("nic", spec.with("nic", &gbs(rate)))?;
        if let (Some(t), Some(layout)) = (p.tokens_per_sec, &p.layout) {
            if t >= target {
                return Ok(JobTarget {
                    question,
                    value: Some(rate),
                    unit: "B/s",
                    detail: format!(
                        "{} per NIC ({layout}, {} tokens/s); tried {} to {}",
                        format_bytes_per_sec(rate),
                        trim_float(t, 6),
                        format_bytes_per_sec(NIC_LADDER_BYTES_PER_SEC[0]),
                        format_bytes_per_sec(NIC_LADDER_BYTES_PER_SEC[NIC_LADDER_BYTES_PER_SEC.len() - 1])
                    ),
                });
            }
            last = format!("{} tokens/s with {} NICs", trim_float(t, 6), format_bytes_per_sec(rate));
        }
    }
    Ok(JobTarget {
        question,
        value: None,
        unit: "B/s",
        detail: format!("not reached on {topo}'s node count; the most: {last}"),
    })
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;

    use super::super::{evaluate, JobInput};
    use super::{solve, Spec};
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
        let solved = solve(&input, &own, &load).unwrap().unwrap();
        let fewest = &solved.targets[0];
        assert_eq!(fewest.value, Some(32.0), "{fewest:?}");
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
        let solved = solve(&input, &own, &load).unwrap().unwrap();
        let domains: Vec<&str> =
            solved.points.iter().filter(|p| p.varied == "super-node").map(|p| p.topo.as_str()).collect();
        assert_eq!(domains, ["rail:gpus=4,servers=4", "rail:gpus=16,servers=1"]);
        assert!(solved.points.iter().filter(|p| p.varied == "super-node").all(|p| p.gpus == 16));
        assert_eq!(solved.targets[0].value, Some(32.0), "{:?}", solved.targets);
        // Not on these 16 GPUs: the NIC and domain questions say none, with the most found.
        assert!(
            solved.targets[1..].iter().all(|t| t.value.is_none() && t.detail.contains("the most")),
            "{:?}",
            solved.targets
        );
    }

    /// A topology file has no node count to vary: said, not guessed.
    #[test]
    fn a_file_is_not_varied() {
        let topo = concat!(env!("CARGO_MANIFEST_DIR"), "/../../topologies/two-node-cluster.toml");
        let mut input = job(topo, Some(1e9));
        input.gpu = Some("h100".into());
        let own = evaluate(&input, &load(topo).unwrap()).unwrap();
        let solved = solve(&input, &own, &load).unwrap().unwrap();
        assert!(solved.points.is_empty());
        assert!(solved.notes.iter().any(|n| n.contains("machine presets")), "{:?}", solved.notes);
        assert_eq!(solved.targets[0].value, None);
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
}
