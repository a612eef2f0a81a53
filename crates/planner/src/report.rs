//! The planner's report in Markdown: one section per scenario section, every time with
//! where it came from, and the solved answers with their sensitivities.

use railyard_units::units::{format_bytes, format_bytes_per_sec, format_secs, trim_float};
use railyard_units::Table;

use crate::Report;

/// Text made safe for one Markdown table cell or heading: no line breaks, `|` escaped.
fn cell(text: &str) -> String {
    text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect::<String>().replace('|', "\\|")
}

fn ms(secs: f64) -> String {
    format!("{} ms", trim_float(secs * 1e3, 4))
}

/// Tokens/s, with the multiple of 10^4 the chapter quotes its figures in.
fn tokens(per_sec: f64) -> String {
    format!("{:.0} ({} x 10^4)", per_sec, trim_float(per_sec / 1e4, 5))
}

impl Report {
    /// The report: its title, then each section present, each rendered by its function below.
    pub fn markdown(&self) -> String {
        let mut s = format!(
            "# {}\n\nCommunication timed by the {}.\n",
            self.title,
            match self.engine {
                crate::Engine::Model => "per-round model (docs/plan.md)",
                crate::Engine::Sim => "flow-level simulator",
            }
        );
        if let Some(x) = &self.job {
            s += &x.markdown();
        }
        if let Some(x) = &self.memory {
            s += &memory(x);
        }
        if let Some(x) = &self.scaling {
            s += &scaling(x);
        }
        if let Some(x) = &self.step {
            s += &step(x);
        }
        if let Some(x) = &self.readiness {
            s += &readiness(x);
        }
        if let Some(x) = &self.latency {
            s += &latency(x);
        }
        if let Some(x) = &self.tail {
            s += &tail(x);
        }
        if let Some(x) = &self.migration {
            s += &migration(x);
        }
        if let Some(x) = &self.supernode {
            s += &supernode(x);
        }
        if let Some(x) = &self.moe {
            s += &moe(x);
        }
        if let Some(x) = &self.bucketing {
            s += &bucketing(x);
        }
        if let Some(x) = &self.solved {
            s += &solved(x);
        }
        s
    }
}

/// Memory and placement (seed 001 §7.1.1).
fn memory(rows: &[crate::memory::MemoryRow]) -> String {
    let mut s = String::new();
    s += "\n## Memory and placement (seed 001 §7.1.1)\n\n";
    let mut t = Table::new(["model", "bytes", "cards", "free on them", "servers", "cards / servers with reserve"]);
    for r in rows {
        t.row([
            cell(&r.name),
            format!("{} GB", trim_float(r.bytes / 1e9, 5)),
            r.gpus.to_string(),
            format!("{} GB", trim_float(r.free_bytes / 1e9, 5)),
            r.servers.to_string(),
            format!("{} / {}", r.gpus_with_reserve, r.servers_with_reserve),
        ]);
    }
    s += &t.render();
    s
}

/// More cards against a fixed cut (example 7.1).
fn scaling(r: &crate::scaling::ScalingReport) -> String {
    let mut s = String::new();
    s += &format!(
        "\n## More cards against a fixed cut (seed 001 §7.1.2, example 7.1)\n\nCommunication {} ({}).\n\n",
        ms(r.comm.secs),
        r.comm.source
    );
    let mut t = Table::new(["card multiple x", "compute", "sequential", "overlapped"]);
    for row in &r.rows {
        t.row([trim_float(row.multiple, 4), ms(row.compute_secs), ms(row.sequential_secs), ms(row.overlapped_secs)]);
    }
    s += &t.render();
    s += &if r.crossover_multiple >= 1.0 {
        format!(
            "\nCompute equals communication at x = {}: beyond it, full overlap stops gaining.\n",
            trim_float(r.crossover_multiple, 3)
        )
    } else {
        format!(
            "\nCommunication already exceeds compute at today's card count (they would be equal at x = {}): \
                 more cards cannot shorten the overlapped step.\n",
            trim_float(r.crossover_multiple, 3)
        )
    };
    s
}

/// Step timelines (§7.6.2, example 7.6).
fn step(r: &crate::step::StepReport) -> String {
    let mut s = String::new();
    s += &format!(
            "\n## Step timelines (seed 001 §7.6.2, example 7.6)\n\nT_step = max(T_compute, t_ready + T_comm) + T_update; compute {}, update {}.\n\n",
            ms(r.compute_secs),
            ms(r.update_secs)
        );
    let mut t = Table::new([
        "timeline",
        "comm",
        "ready",
        "comm ends",
        "step",
        "exposed comm",
        "latest hidden ready",
        "comm / step speed-up",
    ]);
    for l in &r.timelines {
        t.row([
            cell(&l.name),
            ms(l.comm.secs),
            ms(l.ready_secs),
            ms(l.comm_end_secs),
            ms(l.step_secs),
            ms(l.exposed_comm_secs),
            l.latest_hidden_ready_secs.map_or("cannot be hidden".into(), ms),
            format!(
                "{}x / {}x (Amdahl {}x)",
                trim_float(l.comm_speedup, 3),
                trim_float(l.step_speedup, 3),
                trim_float(l.amdahl_speedup, 3)
            ),
        ]);
    }
    s += &t.render();
    s += "\n";
    for l in &r.timelines {
        s += &format!("- {}: {}", cell(&l.name), cell(&l.comm.source));
        if let Some(b) = l.comm.nic_bytes_per_sec {
            s += &format!("; NICs at {} (requests in flight)", format_bytes_per_sec(b));
        }
        s += "\n";
    }
    s
}

/// Readiness skew (§7.6.1).
fn readiness(r: &crate::readiness::ReadinessReport) -> String {
    let mut s = String::new();
    s += &format!(
        "\n## Readiness skew (seed 001 §7.6.1)\n\nThe exchange takes {} and starts when rank {} is ready.\n\n",
        ms(r.comm.secs),
        r.last_ready_rank
    );
    let mut t = Table::new(["case", "start", "finish", "waiting (all ranks)", "measured (all ranks)", "waiting share"]);
    for c in &r.cases {
        t.row([
            cell(&c.name),
            ms(c.start_secs),
            ms(c.finish_secs),
            ms(c.waiting_secs_total),
            ms(c.measured_secs_total),
            format!("{}%", trim_float(c.waiting_share * 100.0, 3)),
        ]);
    }
    s += &t.render();
    s
}

/// Latency-bound vs bandwidth-bound (§7.6.3).
fn latency(r: &crate::latency::LatencyReport) -> String {
    let mut s = String::new();
    s += &format!(
        "\n## Latency-bound vs bandwidth-bound (seed 001 §7.6.3)\n\n{}. The crossover is where the per-round model's \
             start-up equals its payload term.\n\n",
        r.source
    );
    let mut headers = vec!["case".to_string(), "start-up".into(), "crossover size".into()];
    headers.extend(r.sizes_bytes.iter().map(|&b| format_bytes(b)));
    headers.push(format!("{} x smallest", r.repeats));
    let mut t = Table::new(headers);
    for v in &r.variants {
        let mut row = vec![
            cell(&v.name),
            format_secs(v.startup_secs),
            v.crossover_bytes.map_or("none".into(), |c| format!("{} B ({})", trim_float(c, 4), format_bytes(c))),
        ];
        row.extend(v.secs.iter().map(|&x| format_secs(x)));
        row.push(format_secs(v.repeated_secs));
        t.row(row);
    }
    s += &t.render();
    s
}

/// Tail latency of a set of communications.
fn tail(rows: &[crate::latency::TailRow]) -> String {
    let mut s = String::new();
    s += "\n## Tail of a set of communications (seed 001 §7.6.3)\n\n";
    let mut t = Table::new(["case", "count", "mean", "quantile", "which (⌈qN⌉-th smallest)"]);
    for r in rows {
        t.row([cell(&r.name), r.count.to_string(), ms(r.mean_secs), ms(r.quantile_secs), r.quantile_rank.to_string()]);
    }
    s += &t.render();
    s
}

/// State-migration transfer times.
fn migration(rows: &[crate::latency::MigrationRow]) -> String {
    let mut s = String::new();
    s += "\n## State migration transfer (seed 001 §7.6.3)\n\n";
    let mut t = Table::new(["case", "bytes", "transfer", "saved vs the first"]);
    for r in rows {
        t.row([
            cell(&r.name),
            format_bytes(r.bytes),
            format!("{} ms", trim_float(r.secs * 1e3, 5)),
            format!("{} ms", trim_float(r.saved_secs * 1e3, 5)),
        ]);
    }
    s += &t.render();
    s
}

/// Super-nodes at a fixed card count (§7.6.4).
fn supernode(r: &crate::supernode::SupernodeReport) -> String {
    let mut s = String::new();
    s += &format!(
            "\n## Super-nodes at a fixed card count (seed 001 §7.6.4)\n\nState per card {} GB. Gradient: hierarchical (local reduce-scatter, all-reduce across super-nodes, local all-gather) or the flat DP ring, the faster chosen. These are the closed forms of §7.6.4 (α-β per stage), the same under either --engine.\n",
            trim_float(r.state_bytes_per_gpu / 1e9, 4)
        );
    for n in &r.networks {
        s += &format!("\n### {}\n\n", n.name);
        let mut t = Table::new([
            "S",
            "super-nodes",
            "q",
            "egress per super-node",
            "hierarchical",
            "flat ring",
            "gradient",
            "TP all-reduces",
            "step",
            "tokens/s",
        ]);
        for p in &n.rows {
            let g = &p.gradient;
            t.row([
                p.supernode_gpus.to_string(),
                g.supernodes.to_string(),
                g.local_members.to_string(),
                format!(
                    "{} GB at {}",
                    trim_float(g.egress_bytes / 1e9, 4),
                    format_bytes_per_sec(g.egress_bytes_per_sec)
                ),
                ms(g.hierarchical_secs),
                ms(g.flat_ring_secs),
                g.chosen.to_string(),
                ms(p.tp_secs),
                format!("{} s", trim_float(p.step_secs, 4)),
                tokens(p.tokens_per_sec),
            ]);
        }
        s += &t.render();
    }
    if let Some(first) = r.networks.first().and_then(|n| n.rows.first()) {
        s += &format!(
            "\nCompute {} per step (6·P·tokens at peak × MFU), update {}.\n",
            format_secs(first.compute_secs),
            format_secs(first.update_secs)
        );
    }
    if !r.tp_candidates.is_empty() {
        s += "\n### TP candidates\n\n";
        let mut t = Table::new(["TP", "DP", "TP message", "TP all-reduces", "gradient", "step", "tokens/s"]);
        for p in &r.tp_candidates {
            t.row([
                p.tp.to_string(),
                p.dp.to_string(),
                format_bytes(p.tp_message_bytes),
                ms(p.tp_secs),
                ms(p.gradient.secs),
                format!("{} s", trim_float(p.step_secs, 4)),
                tokens(p.tokens_per_sec),
            ]);
        }
        s += &t.render();
    }
    if !r.recovery.is_empty() {
        s += "\n### Checkpoint and recovery: ε ≈ C/I + λ(I/2 + R)\n\n";
        let mut t = Table::new(["S", "recovery R", "overhead ε", "tokens/s", "effective tokens/s"]);
        for row in &r.recovery {
            t.row([
                row.supernode_gpus.to_string(),
                format!("{} s", trim_float(row.recovery_secs, 4)),
                if row.first_order_valid {
                    format!("{}%", trim_float(row.overhead * 100.0, 3))
                } else {
                    format!("{}% (too large for this first-order estimate)", trim_float(row.overhead * 100.0, 3))
                },
                tokens(row.tokens_per_sec),
                tokens(row.effective_tokens_per_sec),
            ]);
        }
        s += &t.render();
    }
    s
}

/// Mixture of experts: capacity, drops, all-to-all (seed 000 §8.7).
fn moe(r: &crate::moe::MoeReport) -> String {
    let mut s = String::new();
    s += &format!(
            "\n## MoE all-to-all (seed 000 §8.7, seed 001 §7.2.3)\n\nCapacity C = CF·T·k/E = {} tokens per expert; {} dropped ({}%), expert {} busiest with {}. \
             Each GPU sends {}; the busiest receives {} (mean {}).\n\n",
            r.capacity_tokens,
            r.dropped_tokens,
            trim_float(r.dropped_share * 100.0, 3),
            r.busiest_expert,
            r.busiest_expert_tokens,
            format_bytes(r.send_bytes_per_gpu),
            format_bytes(r.max_receive_bytes_per_gpu),
            format_bytes(r.mean_receive_bytes_per_gpu),
        );
    let mut t = Table::new([
        "off-node fraction f",
        "remote nodes per token",
        "cross-node per GPU: flat / hierarchical",
        "into the busiest receiver (flat)",
        "dispatch: flat / hierarchical",
        "with combine",
    ]);
    for c in &r.cases {
        t.row([
            trim_float(c.off_node_fraction, 3),
            trim_float(c.remote_nodes_per_token, 4),
            format!(
                "{} / {}",
                format_bytes(c.flat_cross_bytes_per_gpu),
                format_bytes(c.hierarchical_cross_bytes_per_gpu)
            ),
            format_bytes(c.flat_cross_bytes_busiest_receiver),
            format!("{} / {}", format_secs(c.flat_secs), format_secs(c.hierarchical_secs)),
            format!("{} / {}", format_secs(c.flat_round_trip_secs), format_secs(c.hierarchical_round_trip_secs)),
        ]);
    }
    s += &t.render();
    s += &format!(
        "\nUniform routing sends f = {} off the node. Assumed: each of a token's k copies leaves the node with \
             probability f, to any other node alike (so a remote node gets one with 1 − (1 − f/(n−1))^k); flat sends \
             over NIC and NVLink at once, hierarchical crosses once per remote node and then fans out over NVLink; \
             combine is dispatch transposed; capacity rounds down; no per-message start-up.\n",
        trim_float(r.uniform_off_node_fraction, 3)
    );
    if !r.on_topology.is_empty() {
        s += "\nThe uniform dispatch as all-to-all schedules (these move every copy; they do not deduplicate):\n\n";
        let mut t = Table::new(["algorithm", "time", "cross-server bytes (all GPUs)", "how"]);
        for d in &r.on_topology {
            let c = &d.time;
            t.row([
                cell(&d.algorithm),
                format_secs(c.secs),
                c.cross_server_bytes.map_or("-".into(), format_bytes),
                cell(&c.source),
            ]);
        }
        s += &t.render();
    }
    s
}

/// Gradient buckets (§7.6.2).
fn bucketing(r: &crate::bucketing::BucketingReport) -> String {
    let mut s = String::new();
    s += &format!("\n## Gradient bucketing (seed 000 §8.6.2, §8.6.7)\n\nEach bucket: {}.\n\n", r.source);
    let mut t = Table::new(["bucket cap", "buckets", "backward", "all-reduces", "total", "exposed", "overlap ratio"]);
    for p in &r.plans {
        t.row([
            format_bytes(p.bucket_cap_bytes),
            p.buckets.len().to_string(),
            ms(p.backward_secs),
            ms(p.comm_secs),
            ms(p.total_secs),
            ms(p.exposed_comm_secs),
            format!("{}%", trim_float(p.overlap_ratio * 100.0, 3)),
        ]);
    }
    s += &t.render();
    s += &format!("\nLeast exposed communication with {} buckets.\n", format_bytes(r.best_bucket_cap_bytes));
    s
}

/// The job on other clusters: one row per cluster, the targets, the sensitivities.
fn job_solved(j: &crate::job::solve::JobSolved) -> String {
    use crate::job::solve::Unit;
    let mut s = format!(
        "### Your job on other clusters\n\nToday: {}, {} a step, {} tokens/s.",
        j.layout,
        format_secs(j.step_secs),
        trim_float(j.tokens_per_sec, 6)
    );
    if let (Some(l), Some(t)) = (&j.searched_layout, j.searched_tokens_per_sec) {
        s += &format!(" A search on today's cluster finds {l} at {} tokens/s.", trim_float(t, 6));
    }
    s += " Node and domain rows are new layout searches, compared with the best on today's cluster; \
          NIC rows keep today's layout (a floor: a layout searched for that rate is no slower).\n\n";
    if !j.points.is_empty() {
        let mut t = Table::new(["changed", "topology", "GPUs", "layout", "step", "tokens/s", "vs today"]);
        for p in &j.points {
            let gpus = if p.gpus == 0 { "-".to_string() } else { p.gpus.to_string() };
            let (layout, step, tokens, vs) = match (&p.layout, p.step_secs, p.tokens_per_sec) {
                (Some(l), Some(st), Some(tk)) => (
                    l.clone(),
                    format_secs(st),
                    trim_float(tk, 6),
                    p.vs_today.map_or(String::new(), |v| format!("{v:.3}x")),
                ),
                _ => (p.note.clone().unwrap_or_default(), String::new(), String::new(), String::new()),
            };
            t.row([p.varied.as_str().to_string(), p.topo.clone(), gpus, layout, step, tokens, vs]);
        }
        s += &t.render();
    }
    if !j.notes.is_empty() {
        s += "\n";
    }
    for n in &j.notes {
        s += &format!("- {n}.\n");
    }
    if !j.targets.is_empty() {
        s += "\n";
        let mut t = Table::new(["question", "answer", "how"]);
        for a in &j.targets {
            let value = match (a.value, a.unit) {
                (None, _) => "none".to_string(),
                (Some(v), Unit::BytesPerSec) => format_bytes_per_sec(v),
                (Some(v), Unit::Nodes) => format!("{v} nodes"),
                (Some(v), Unit::GpusPerDomain) => format!("{v} GPUs per domain"),
            };
            t.row([a.question.clone(), value, a.detail.clone()]);
        }
        s += &t.render();
    }
    let change = |secs: f64| format!("{} ({:+.1}%)", format_secs(secs), (secs / j.step_secs - 1.0) * 100.0);
    s += &format!(
        "\nSensitivity of {}: matrix multiplies 10% faster give a step of {}",
        j.layout,
        change(j.step_with_faster_compute_secs)
    );
    match j.step_with_faster_nics_secs {
        Some(secs) => s += &format!("; NICs 10% faster, {}.\n", change(secs)),
        None => s += ".\n",
    }
    s += &format!("\n{} layout searches.\n", j.searches);
    s
}

/// The solved answers and their sensitivities.
fn solved(solved: &crate::solve::Solved) -> String {
    let mut s = String::new();
    s += "\n## Solved\n\n";
    if let Some(job) = &solved.job {
        s += &job_solved(job);
        if solved.answers.is_empty() {
            return s;
        }
    }
    let mut t = Table::new(["question", "answer", "how"]);
    for a in &solved.answers {
        let value = match (a.value, a.unit) {
            (None, _) => "none".to_string(),
            (Some(v), "s") => format_secs(v),
            (Some(v), "bytes") => format!("{} B ({})", trim_float(v, 4), format_bytes(v)),
            (Some(v), "B/s") => format_bytes_per_sec(v),
            (Some(v), "GPUs") => format!("{v} GPUs"),
            (Some(v), "TP") => format!("TP{v}"),
            (Some(v), _) => trim_float(v, 4),
        };
        t.row([cell(&a.question), value, a.detail.clone()]);
    }
    s += &t.render();
    if solved.sensitivity.is_empty() {
        return s;
    }
    s += "\n### Sensitivity: the step when each input governs 10% less time\n\n\
              Times × 0.9, bandwidths and MFU ÷ 0.9; the largest change first, equal ones marked tied.\n\n";
    let mut t = Table::new(["around", "step", "most sensitive to", "then"]);
    for sens in &solved.sensitivity {
        let words = |c: &crate::solve::InputChange| {
            let mut w = format!("{} ({})", c.input, format_secs(c.step_change_secs));
            if let Some(n) = &c.note {
                w += &format!(" [{n}]");
            }
            w
        };
        let first = sens.inputs.first();
        let tied = |c: &crate::solve::InputChange| {
            first.is_some_and(|f| {
                (f.step_change_secs - c.step_change_secs).abs() <= 1e-9 * f.step_change_secs.abs().max(1e-12)
            })
        };
        let lead: Vec<String> = sens.inputs.iter().filter(|c| tied(c)).map(words).collect();
        let rest: Vec<String> = sens.inputs.iter().filter(|c| !tied(c)).map(words).collect();
        t.row([
            cell(&sens.of),
            format_secs(sens.step_secs),
            if lead.len() > 1 { format!("{} (tied)", lead.join(", ")) } else { lead.join(", ") },
            rest.join(", "),
        ]);
    }
    s += &t.render();
    s
}
