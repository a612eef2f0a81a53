//! A job's plan in Markdown: the job, the ranked layouts, and the fastest one's step
//! phase by phase with its memory.

use railyard_units::units::{format_bytes, format_secs, trim_float};
use railyard_units::Table;

use super::{describe_memory, JobReport};

impl JobReport {
    pub fn markdown(&self) -> String {
        let m = &self.model;
        let p = &self.params;
        let mut s = format!(
            "\n## Job: {} on {} ({} {} GPUs)\n\n{} parameters ({} active per token), {} layers, hidden {}, {} heads ({} key/value), \
             sequence {}, batch {} sequences ({} tokens); {}, ZeRO-{}, {} recomputation, {} attention; matrix multiplies at {}% of the GPU's peak \
             (`compute_efficiency`), the other kernels at its memory bandwidth.\n",
            m.name,
            self.topo,
            self.gpus,
            self.gpu.name.to_uppercase(),
            billions(p.total()),
            billions(p.active),
            m.layers,
            m.hidden,
            m.heads,
            m.kv_heads(),
            m.seq_len,
            self.global_batch,
            self.global_batch * m.seq_len,
            match self.precision {
                super::Precision::Bf16 => "BF16",
                super::Precision::Fp8 => "FP8",
            },
            self.zero,
            match self.recompute {
                super::Recompute::None => "no",
                super::Recompute::Selective => "selective",
                super::Recompute::Full => "full",
            },
            match self.attention {
                super::Attention::Fused => "fused",
                super::Attention::Unfused => "unfused",
            },
            trim_float(self.compute_efficiency * 100.0, 3),
        );
        if self.layouts_weighed > 1 {
            s += &format!(
                "\n{} layouts weighed, {} refused for memory; the fastest {} that fit:\n\n",
                self.layouts_weighed,
                self.layouts_refused_for_memory,
                self.ranked.len()
            );
        } else {
            s += "\n";
        }
        let mut t = Table::new([
            "layout",
            "step",
            "tokens/s",
            "TFLOP/s per GPU",
            "MFU",
            "bubble",
            "exposed communication",
            "memory (of capacity)",
        ]);
        for e in &self.ranked {
            let Some(st) = &e.step else { continue };
            t.row([
                e.layout.to_string(),
                format_secs(st.step_secs),
                format!("{:.0}", st.tokens_per_sec),
                trim_float(st.model_tflops_per_gpu, 4),
                format!("{:.1}%", st.mfu * 100.0),
                format_secs(st.bubble_secs),
                format_secs(st.exposed_comm_secs),
                format!(
                    "{} ({:.0}%)",
                    format_bytes(e.memory.total_bytes),
                    e.memory.total_bytes / e.memory.capacity_bytes * 100.0
                ),
            ]);
        }
        s += &t.render();
        if let Some(why) = &self.why {
            s += &format!("\n{why}.\n");
        }
        if let Some(best) = self.ranked.first() {
            if let Some(st) = &best.step {
                s += &format!(
                    "\n### {}: one step, phase by phase\n\n{} micro-batches; one on the busiest stage: forward {}, backward {}, \
                     recomputed {}. Compute {}, pipeline bubble {}, optimizer {}.\n\n",
                    best.layout,
                    st.micro_batches,
                    format_secs(st.forward_secs),
                    format_secs(st.backward_secs),
                    format_secs(st.recompute_secs),
                    format_secs(st.compute_secs),
                    format_secs(st.bubble_secs),
                    format_secs(st.optimizer_secs),
                );
                let mut t = Table::new([
                    "communication",
                    "collective",
                    "ranks",
                    "size",
                    "one call",
                    "algorithm",
                    "calls",
                    "exposed",
                ]);
                for c in &st.comms {
                    t.row([
                        c.name.clone(),
                        c.collective.clone(),
                        c.ranks.to_string(),
                        format_bytes(c.bytes),
                        format_secs(c.secs),
                        c.algorithm.clone(),
                        trim_float(c.calls, 6),
                        format_secs(c.exposed_secs),
                    ]);
                }
                s += &t.render();
                s += &format!("\nMemory per GPU: {}.\n", describe_memory(&best.memory));
            }
        }
        s += &format!(
            "\n{} collectives costed as schedules on {} ({}, the fastest of NCCL's algorithms).\n",
            self.costings,
            self.topo,
            match self.engine {
                crate::Engine::Model => "per-round model at the rates NCCL-class software reaches",
                crate::Engine::Sim => {
                    "per-round model at the rates NCCL-class software reaches, scaled by the flow-level simulator's \
                     makespan over the line-rate bound, each group simulated beside the groups of its dimension that \
                     share its servers' NICs"
                }
            }
        );
        // "1 of them was", "3 of them were".
        let of_them = |n: usize| format!("{n} of them {}", if n == 1 { "was" } else { "were" });
        if self.simulated_without_all_neighbours > 0 {
            s += &format!(
                "{} simulated without some of the groups sharing their NICs (more than {} ranks together): \
                 those collectives may be faster here than they run.\n",
                of_them(self.simulated_without_all_neighbours),
                crate::comm::MAX_SIM_RANKS
            );
        }
        if self.timed_by_model > 0 {
            s += &format!(
                "{} timed by the model alone (groups of more than {} ranks).\n",
                of_them(self.timed_by_model),
                crate::comm::MAX_SIM_RANKS
            );
        }
        s
    }
}

fn billions(params: f64) -> String {
    format!("{}B", trim_float(params / 1e9, 4))
}
