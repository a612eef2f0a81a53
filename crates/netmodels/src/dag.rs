//! Dependency graphs (seed 001 §7.4.1, §7.4.3, §7.6.1): operations with durations;
//! program edges u→v (v starts after u finishes); resource edges (operations on one
//! resource run one at a time, in list order); an ordering policy that either keeps
//! only those edges or also chains every operation after the previous one. Finish
//! time = max over predecessors of their finish + own duration; the longest chain is
//! the critical path; slack = latest start − earliest start. Plus the stale-read
//! counterexample of §7.4.3 as an event timeline.

use serde::{Deserialize, Serialize};

use crate::error::NetModelError;
use railyard_units::quantity;
use railyard_units::units::format_secs;
use railyard_units::Table;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Operation {
    pub name: String,
    #[serde(deserialize_with = "quantity::secs")]
    pub secs: f64,
    /// Earliest start (data ready), default 0.
    #[serde(default, deserialize_with = "quantity::secs")]
    pub ready_secs: f64,
    /// Operations naming the same resource run one at a time, in list order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Policy {
    /// Only the program and resource edges.
    OnlyRequired,
    /// Every operation also waits for the one listed before it (a global order).
    AllInOrder,
}

impl Policy {
    pub fn as_str(self) -> &'static str {
        match self {
            Policy::OnlyRequired => "only-required",
            Policy::AllInOrder => "all-in-order",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Graph {
    pub name: String,
    pub operations: Vec<Operation>,
    /// Program edges [from, to] by operation name.
    #[serde(default)]
    pub edges: Vec<(String, String)>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StaleRead {
    #[serde(deserialize_with = "quantity::secs")]
    pub early_read_secs: f64,
    #[serde(deserialize_with = "quantity::secs")]
    pub data_update_secs: f64,
    #[serde(deserialize_with = "quantity::secs")]
    pub flag_visible_secs: f64,
    #[serde(deserialize_with = "quantity::secs")]
    pub flag_read_secs: f64,
    #[serde(deserialize_with = "quantity::secs")]
    pub return_secs: f64,
    /// Time to re-read D once the conflict is seen at the flag read.
    #[serde(deserialize_with = "quantity::secs")]
    pub reread_secs: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DagInput {
    pub graphs: Vec<Graph>,
    pub policies: Vec<Policy>,
    #[serde(default)]
    pub stale_read: Option<StaleRead>,
}

fn op(name: &str, us: f64, ready_us: f64, resource: Option<&str>) -> Operation {
    Operation {
        name: name.into(),
        secs: us * 1e-6,
        ready_secs: ready_us * 1e-6,
        resource: resource.map(str::to_string),
    }
}

impl Default for DagInput {
    fn default() -> Self {
        let e = |a: &str, b: &str| (a.to_string(), b.to_string());
        let publish = |unit: Option<&str>| {
            vec![
                op("A write D", 20.0, 0.0, unit),
                op("recovery (D visible)", 80.0, 0.0, unit),
                op("B notify D ready", 2.0, 0.0, unit),
                op("C unrelated transfer", 10.0, 0.0, unit),
            ]
        };
        let publish_edges = vec![e("A write D", "recovery (D visible)"), e("recovery (D visible)", "B notify D ready")];
        let readiness = |ready_ms: [f64; 4], exchange_ms: f64| {
            let mut ops: Vec<Operation> =
                ready_ms.iter().enumerate().map(|(i, &r)| op(&format!("rank {i} ready"), 0.0, r * 1e3, None)).collect();
            ops.push(op("exchange", exchange_ms * 1e3, 0.0, None));
            let edges = (0..4).map(|i| e(&format!("rank {i} ready"), "exchange")).collect();
            (ops, edges)
        };
        let (skew, skew_edges) = readiness([0.0, 0.0, 0.0, 2.0], 0.4);
        let (half, half_edges) = readiness([0.0, 0.0, 0.0, 2.0], 0.2);
        let (even, even_edges) = readiness([0.0; 4], 0.4);
        DagInput {
            graphs: vec![
                // seed 001 例題 7.4: A→(recovery)→B is the only required order.
                Graph {
                    name: "example 7.4: publish D, independent C".into(),
                    operations: publish(None),
                    edges: publish_edges.clone(),
                },
                Graph {
                    name: "example 7.4 on one shared processing unit".into(),
                    operations: publish(Some("processing unit")),
                    edges: publish_edges,
                },
                // seed 001 §7.6.1: readiness 0, 0, 0, 2 ms then a 0.4 ms exchange.
                Graph { name: "readiness skew".into(), operations: skew, edges: skew_edges },
                Graph { name: "exchange halved".into(), operations: half, edges: half_edges },
                Graph { name: "everyone ready at 0".into(), operations: even, edges: even_edges },
            ],
            policies: vec![Policy::AllInOrder, Policy::OnlyRequired],
            stale_read: Some(StaleRead {
                early_read_secs: 1e-6,
                data_update_secs: 2e-6,
                flag_visible_secs: 3e-6,
                flag_read_secs: 4e-6,
                return_secs: 5e-6,
                reread_secs: 2e-6,
            }),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OpResult {
    pub name: String,
    pub start_secs: f64,
    pub finish_secs: f64,
    pub slack_secs: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Schedule {
    pub graph: String,
    pub policy: Policy,
    pub makespan_secs: f64,
    pub critical_path: Vec<String>,
    /// Sum of durations on the critical path (plus the ready time it starts from).
    pub critical_path_secs: f64,
    pub operations: Vec<OpResult>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Event {
    pub at_secs: f64,
    pub what: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StaleReadResult {
    pub events: Vec<Event>,
    /// The early read happened before the update: the value returned is the old one.
    pub stale: bool,
    /// With re-read on conflict, when the correct value is in hand.
    pub corrected_secs: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DagOutput {
    pub schedules: Vec<Schedule>,
    pub stale_read: Option<StaleReadResult>,
}

/// Earliest schedule of one graph under one policy.
pub fn schedule(graph: &Graph, policy: Policy) -> Result<Schedule, NetModelError> {
    let n = graph.operations.len();
    let index = |name: &str, field: String| {
        graph
            .operations
            .iter()
            .position(|o| o.name == name)
            .ok_or_else(|| NetModelError::BadInput { field, message: format!("unknown operation \"{name}\"") })
    };
    let mut preds: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, (a, b)) in graph.edges.iter().enumerate() {
        let (a, b) = (index(a, format!("edges[{i}][0]"))?, index(b, format!("edges[{i}][1]"))?);
        preds[b].push(a);
    }
    for (i, o) in graph.operations.iter().enumerate() {
        if let Some(r) = &o.resource {
            if let Some(prev) = (0..i).rev().find(|&j| graph.operations[j].resource.as_ref() == Some(r)) {
                preds[i].push(prev);
            }
        }
        if policy == Policy::AllInOrder && i > 0 {
            preds[i].push(i - 1);
        }
    }
    // Kahn's algorithm: finish times in topological order, or a cycle is an error.
    let mut indegree: Vec<usize> = preds.iter().map(Vec::len).collect();
    let mut succs: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (v, ps) in preds.iter().enumerate() {
        for &u in ps {
            succs[u].push(v);
        }
    }
    let mut order = Vec::with_capacity(n);
    let mut queue: std::collections::VecDeque<usize> = (0..n).filter(|&v| indegree[v] == 0).collect();
    while let Some(u) = queue.pop_front() {
        order.push(u);
        for &v in &succs[u] {
            indegree[v] -= 1;
            if indegree[v] == 0 {
                queue.push_back(v);
            }
        }
    }
    if order.len() < n {
        let stuck = (0..n).find(|&v| indegree[v] > 0).map(|v| graph.operations[v].name.clone()).unwrap_or_default();
        return Err(NetModelError::BadInput {
            field: format!("graph \"{}\"", graph.name),
            message: format!("has a cycle through \"{stuck}\""),
        });
    }
    let mut start = vec![0.0f64; n];
    let mut finish = vec![0.0f64; n];
    for &v in &order {
        let o = &graph.operations[v];
        start[v] = preds[v].iter().map(|&u| finish[u]).fold(o.ready_secs, f64::max);
        finish[v] = start[v] + o.secs;
    }
    let makespan = finish.iter().copied().fold(0.0, f64::max);
    // Backward pass: latest finish without delaying the makespan.
    let mut latest_finish = vec![makespan; n];
    for &v in order.iter().rev() {
        for &s in &succs[v] {
            latest_finish[v] = latest_finish[v].min(latest_finish[s] - graph.operations[s].secs);
        }
    }
    // Critical path: from the last-finishing operation back through a predecessor
    // whose finish equals this one's start.
    let mut path = Vec::new();
    let mut at = (0..n).max_by(|&a, &b| finish[a].total_cmp(&finish[b]).then(b.cmp(&a)));
    while let Some(v) = at {
        path.push(v);
        at = preds[v].iter().copied().filter(|&u| (finish[u] - start[v]).abs() <= 1e-15 + 1e-12 * start[v]).max();
    }
    path.reverse();
    let critical_path_secs =
        path.first().map_or(0.0, |&v| start[v]) + path.iter().map(|&v| graph.operations[v].secs).sum::<f64>();
    Ok(Schedule {
        graph: graph.name.clone(),
        policy,
        makespan_secs: makespan,
        critical_path: path.iter().map(|&v| graph.operations[v].name.clone()).collect(),
        critical_path_secs,
        operations: (0..n)
            .map(|v| OpResult {
                name: graph.operations[v].name.clone(),
                start_secs: start[v],
                finish_secs: finish[v],
                // Rounding (20 + 80 µs in binary) must not show a critical operation as late.
                slack_secs: (latest_finish[v] - finish[v]).max(0.0),
            })
            .collect(),
    })
}

fn stale(s: &StaleRead) -> StaleReadResult {
    let stale = s.early_read_secs < s.data_update_secs;
    let mut events = vec![
        Event {
            at_secs: s.early_read_secs,
            what: format!("consumer reads D early: gets the {} value", if stale { "old" } else { "new" }),
        },
        Event { at_secs: s.data_update_secs, what: "producer's write of D becomes visible".into() },
        Event { at_secs: s.flag_visible_secs, what: "ready flag becomes visible".into() },
        Event { at_secs: s.flag_read_secs, what: "consumer reads the flag: set".into() },
        Event {
            at_secs: s.return_secs,
            what: format!(
                "results returned in order flag, D — D is {}",
                if stale { "stale: returning later does not move the read" } else { "fresh" }
            ),
        },
    ];
    let corrected = if stale { s.flag_read_secs + s.reread_secs } else { s.return_secs };
    if stale {
        events.push(Event {
            at_secs: corrected,
            what: "conflict seen at the flag read, D re-read: new value in hand".into(),
        });
    }
    events.sort_by(|a, b| a.at_secs.total_cmp(&b.at_secs));
    StaleReadResult { events, stale, corrected_secs: corrected }
}

pub fn dag(input: &DagInput) -> Result<DagOutput, NetModelError> {
    let mut schedules = Vec::new();
    for g in &input.graphs {
        for &p in &input.policies {
            schedules.push(schedule(g, p)?);
        }
    }
    Ok(DagOutput { schedules, stale_read: input.stale_read.as_ref().map(stale) })
}

impl DagOutput {
    pub fn markdown(&self) -> String {
        let mut out = String::from("# Dependencies and the critical path\n\n");
        let mut t = Table::new(["graph", "policy", "finish", "critical path", "each operation finishes at"]);
        for s in &self.schedules {
            let ops: Vec<String> =
                s.operations.iter().map(|o| format!("{} {}", o.name, format_secs(o.finish_secs))).collect();
            t.row([
                s.graph.clone(),
                s.policy.as_str().to_string(),
                format_secs(s.makespan_secs),
                s.critical_path.join(" → "),
                ops.join("; "),
            ]);
        }
        out.push_str(&t.render());
        if let Some(r) = &self.stale_read {
            out.push_str("\nStale read: ordering must hold at the moment the data is read.\n\n");
            let mut e = Table::new(["time", "event"]);
            for ev in &r.events {
                e.row([format_secs(ev.at_secs), ev.what.clone()]);
            }
            out.push_str(&e.render());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn example_7_4_and_section_7_6_1() {
        let o = dag(&DagInput::default()).unwrap();
        let find = |g: &str, p: Policy| o.schedules.iter().find(|s| s.graph.starts_with(g) && s.policy == p).unwrap();
        let us = |x: f64| (x * 1e6 * 1e6).round() / 1e6;
        let ordered = find("example 7.4: publish", Policy::AllInOrder);
        assert_eq!(us(ordered.makespan_secs), 112.0);
        let required = find("example 7.4: publish", Policy::OnlyRequired);
        assert_eq!(us(required.makespan_secs), 102.0);
        assert_eq!(us(required.operations[3].finish_secs), 10.0);
        assert_eq!(required.critical_path, ["A write D", "recovery (D visible)", "B notify D ready"]);
        assert_eq!(us(required.operations[3].slack_secs), 92.0);
        let shared = find("example 7.4 on one shared", Policy::OnlyRequired);
        assert_eq!(us(shared.makespan_secs), 112.0);
        let ms = |g: &str| (find(g, Policy::OnlyRequired).makespan_secs * 1e4).round() / 10.0;
        assert_eq!((ms("readiness"), ms("exchange"), ms("everyone")), (2.4, 2.2, 0.4));
        let s = o.stale_read.unwrap();
        assert!(s.stale);
        assert!((s.corrected_secs - 6e-6).abs() < 1e-15);
    }

    #[test]
    fn cycles_and_unknown_names_are_errors() {
        let g = Graph {
            name: "loop".into(),
            operations: vec![op("a", 1.0, 0.0, None), op("b", 1.0, 0.0, None)],
            edges: vec![("a".into(), "b".into()), ("b".into(), "a".into())],
        };
        assert!(schedule(&g, Policy::OnlyRequired).unwrap_err().to_string().contains("cycle"));
        let g = Graph {
            name: "x".into(),
            operations: vec![op("a", 1.0, 0.0, None)],
            edges: vec![("a".into(), "zz".into())],
        };
        assert!(schedule(&g, Policy::OnlyRequired).unwrap_err().to_string().contains("edges[0][1]"));
    }
}
