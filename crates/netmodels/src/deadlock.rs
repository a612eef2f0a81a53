//! Deadlock (seed 001 §7.5.4): who holds which resource and who waits for which gives a
//! wait-for graph (X → Y when X waits for something Y holds); a cycle is a deadlock —
//! every resource on it is held and every release waits on the next. Ordered
//! acquisition or a reserved resource for responses breaks the cycle.

use serde::{Deserialize, Serialize};

use crate::error::NetModelError;
use railyard_units::Table;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Agent {
    pub name: String,
    #[serde(default)]
    pub holds: Vec<String>,
    #[serde(default)]
    pub waits_for: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WaitGraph {
    pub name: String,
    pub agents: Vec<Agent>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeadlockInput {
    pub graphs: Vec<WaitGraph>,
}

fn agent(name: &str, holds: &[&str], waits: &[&str]) -> Agent {
    Agent {
        name: name.into(),
        holds: holds.iter().map(|s| s.to_string()).collect(),
        waits_for: waits.iter().map(|s| s.to_string()).collect(),
    }
}

impl Default for DeadlockInput {
    fn default() -> Self {
        DeadlockInput {
            graphs: vec![
                // Figure 7-49: two requests, each holding what the other needs.
                WaitGraph {
                    name: "request 1 holds A, request 2 holds B".into(),
                    agents: vec![agent("request 1", &["A"], &["B"]), agent("request 2", &["B"], &["A"])],
                },
                // Ordered acquisition: everyone takes A before B.
                WaitGraph {
                    name: "both acquire A before B".into(),
                    agents: vec![agent("request 1", &["A"], &["B"]), agent("request 2", &[], &["A"])],
                },
                // Full receive buffer: the release message needs a data slot too.
                WaitGraph {
                    name: "responses share the 8 data slots".into(),
                    agents: vec![
                        agent("new request", &[], &["data slots"]),
                        agent("queued requests", &["data slots"], &["release message"]),
                        agent("release message", &["release message"], &["data slots"]),
                    ],
                },
                // Figure 7-50: a reserved response slot lets the release go back.
                WaitGraph {
                    name: "responses have a reserved slot".into(),
                    agents: vec![
                        agent("new request", &[], &["data slots"]),
                        agent("queued requests", &["data slots"], &["release message"]),
                        agent("release message", &["release message", "reserved response slot"], &[]),
                    ],
                },
            ],
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cycle {
    /// Agents around the cycle, each waiting for a resource the next holds.
    pub agents: Vec<String>,
    /// The resource each waits for, aligned with `agents`.
    pub resources: Vec<String>,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GraphResult {
    pub name: String,
    /// Wait-for edges: (waiter, resource, holder).
    pub edges: Vec<(String, String, String)>,
    pub cycles: Vec<Cycle>,
    pub deadlocked: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeadlockOutput {
    pub graphs: Vec<GraphResult>,
}

const MAX_CYCLES: usize = 100;

fn analyse(g: &WaitGraph) -> GraphResult {
    let n = g.agents.len();
    let mut adj: Vec<Vec<(usize, String)>> = vec![Vec::new(); n];
    let mut edges = Vec::new();
    for (i, a) in g.agents.iter().enumerate() {
        for r in &a.waits_for {
            for (j, b) in g.agents.iter().enumerate() {
                if b.holds.contains(r) {
                    adj[i].push((j, r.clone()));
                    edges.push((a.name.clone(), r.clone(), b.name.clone()));
                }
            }
        }
    }
    // Elementary cycles, each found once from its lowest agent (small graphs; capped).
    let mut cycles = Vec::new();
    for start in 0..n {
        let mut stack: Vec<(usize, usize)> = vec![(start, 0)];
        let mut path: Vec<(usize, String)> = Vec::new();
        let mut on_path = vec![false; n];
        on_path[start] = true;
        while let Some(&mut (v, ref mut next)) = stack.last_mut() {
            if *next < adj[v].len() && cycles.len() < MAX_CYCLES {
                let (w, r) = adj[v][*next].clone();
                *next += 1;
                if w == start {
                    let mut agents: Vec<usize> = path.iter().map(|(a, _)| *a).collect();
                    agents.insert(0, start);
                    agents.truncate(path.len() + 1);
                    let mut resources: Vec<String> = path.iter().map(|(_, r)| r.clone()).collect();
                    resources.push(r);
                    let names: Vec<String> = agents.iter().map(|&a| g.agents[a].name.clone()).collect();
                    let text = names
                        .iter()
                        .zip(&resources)
                        .map(|(a, r)| format!("{a} waits for {r}"))
                        .collect::<Vec<_>>()
                        .join(", held by ")
                        + &format!(", held by {}", names[0]);
                    cycles.push(Cycle { agents: names, resources, text });
                } else if w > start && !on_path[w] {
                    on_path[w] = true;
                    path.push((w, r));
                    stack.push((w, 0));
                }
            } else {
                stack.pop();
                if let Some((w, _)) = path.pop() {
                    on_path[w] = false;
                }
            }
        }
    }
    // `path` holds the agents after `start`, with the resource used to reach each; rebuild
    // the resource list so resource i is what agent i waits for.
    for c in &mut cycles {
        let k = c.agents.len();
        let mut waits = Vec::with_capacity(k);
        for i in 0..k {
            let from = g.agents.iter().position(|a| a.name == c.agents[i]).unwrap_or(0);
            let to_name = &c.agents[(i + 1) % k];
            let to = g.agents.iter().position(|a| &a.name == to_name).unwrap_or(0);
            waits.push(adj[from].iter().find(|(j, _)| *j == to).map(|(_, r)| r.clone()).unwrap_or_default());
        }
        c.text = (0..k)
            .map(|i| format!("{} waits for {} held by {}", c.agents[i], waits[i], c.agents[(i + 1) % k]))
            .collect::<Vec<_>>()
            .join("; ");
        c.resources = waits;
    }
    GraphResult { name: g.name.clone(), edges, deadlocked: !cycles.is_empty(), cycles }
}

pub fn deadlock(input: &DeadlockInput) -> Result<DeadlockOutput, NetModelError> {
    for (i, g) in input.graphs.iter().enumerate() {
        for (j, a) in g.agents.iter().enumerate() {
            if g.agents[..j].iter().any(|b| b.name == a.name) {
                return Err(NetModelError::BadInput {
                    field: format!("graphs[{i}].agents[{j}].name"),
                    message: format!("\"{}\" appears twice", a.name),
                });
            }
        }
        if g.agents.len() > 1000 {
            return Err(NetModelError::BadInput {
                field: format!("graphs[{i}].agents"),
                message: "at most 1000 agents".into(),
            });
        }
    }
    Ok(DeadlockOutput { graphs: input.graphs.iter().map(analyse).collect() })
}

impl DeadlockOutput {
    pub fn markdown(&self) -> String {
        let mut out =
            String::from("# Deadlock\n\nX waits for a resource Y holds: an edge X → Y; a cycle is a deadlock.\n\n");
        let mut t = Table::new(["graph", "deadlocked", "cycles"]);
        for g in &self.graphs {
            let cycles: Vec<String> = g.cycles.iter().map(|c| c.text.clone()).collect();
            t.row([
                g.name.clone(),
                if g.deadlocked { "yes".into() } else { "no".into() },
                if cycles.is_empty() { "-".into() } else { cycles.join(" | ") },
            ]);
        }
        out.push_str(&t.render());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_7_5_4() {
        let o = deadlock(&DeadlockInput::default()).unwrap();
        let dl: Vec<bool> = o.graphs.iter().map(|g| g.deadlocked).collect();
        assert_eq!(dl, vec![true, false, true, false]);
        let c = &o.graphs[0].cycles[0];
        assert_eq!(c.agents, vec!["request 1", "request 2"]);
        assert_eq!(c.resources, vec!["B", "A"]);
        assert_eq!(o.graphs[0].cycles.len(), 1);
        assert_eq!(o.graphs[2].cycles[0].agents, vec!["queued requests", "release message"]);
    }
}
