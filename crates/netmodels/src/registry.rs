//! Every scenario model, once: its name, what it answers (with its seed section), and how
//! to read its inputs (defaults, a scenario file, `key=value` changes), run it, explain it
//! and draw it. The CLI's `railyard model NAME` subcommands and the Python package's
//! `railyard.model(NAME, ...)` are both driven by this table.

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::error::NetModelError;
use crate::{
    concurrency, connection_state, dag, deadlock, ecmp, ep_dispatch, feedback, incast, message, multipath, nic_relay,
    queue, remote_read, slots, spray,
};

/// One scenario model.
#[derive(Debug, Clone, Copy)]
pub struct Model {
    /// As `railyard model NAME` names it.
    pub name: &'static str,
    /// What it answers, with its seed section.
    pub about: &'static str,
    /// Whether it draws a chart.
    pub has_chart: bool,
    inputs: fn(&Inputs) -> Result<String, NetModelError>,
    evaluate: fn(&Inputs, bool) -> Result<Evaluation, NetModelError>,
}

/// Where a model's inputs come from: its defaults (the chapter's worked example) or a
/// scenario file's JSON text, then each change in order (a dotted key, e.g.
/// `reuse.snapshot_bytes`, and its new value).
#[derive(Debug, Clone, Default)]
pub struct Inputs<'a> {
    pub scenario: Option<&'a str>,
    pub changes: &'a [(String, Value)],
}

/// A model's run: its inputs and output as JSON (each field in the model's order), the
/// explanation in Markdown and, when asked, its chart.
#[derive(Debug, Clone)]
pub struct Evaluation {
    pub inputs_json: String,
    pub output_json: String,
    pub markdown: String,
    pub chart_svg: Option<String>,
}

impl Model {
    /// The inputs that would be used, as JSON.
    pub fn inputs(&self, inputs: &Inputs) -> Result<String, NetModelError> {
        (self.inputs)(inputs)
    }

    /// Run the model (and draw its chart, with `chart`, where it has one).
    pub fn evaluate(&self, inputs: &Inputs, chart: bool) -> Result<Evaluation, NetModelError> {
        (self.evaluate)(inputs, chart)
    }
}

/// A model as the table runs it.
trait Scenario {
    type I: DeserializeOwned + Serialize + Default;
    type O: Serialize;
    fn run(input: &Self::I) -> Result<Self::O, NetModelError>;
    fn markdown(output: &Self::O, input: &Self::I) -> String;
    fn chart(_: &Self::O, _: &Self::I) -> Option<String> {
        None
    }
}

macro_rules! scenario {
    ($marker:ident, $module:ident, $input:ident, $output:ident, $run:expr, $markdown:expr $(, chart = $chart:expr)?) => {
        struct $marker;
        impl Scenario for $marker {
            type I = $module::$input;
            type O = $module::$output;
            fn run(input: &Self::I) -> Result<Self::O, NetModelError> {
                $run(input)
            }
            fn markdown(output: &Self::O, input: &Self::I) -> String {
                #[allow(clippy::redundant_closure_call)]
                $markdown(output, input)
            }
            $(fn chart(output: &Self::O, input: &Self::I) -> Option<String> {
                Some($chart(output, input))
            })?
        }
    };
}

scenario!(Message, message, MessageInput, MessageOutput, message::message, |o: &message::MessageOutput, i| o
    .markdown(i));
scenario!(
    EpDispatch,
    ep_dispatch,
    EpDispatchInput,
    EpDispatchOutput,
    ep_dispatch::ep_dispatch,
    |o: &ep_dispatch::EpDispatchOutput, _| o.markdown()
);
scenario!(
    NicRelay,
    nic_relay,
    NicRelayInput,
    NicRelayOutput,
    nic_relay::nic_relay,
    |o: &nic_relay::NicRelayOutput, i| o.markdown(i)
);
scenario!(
    Concurrency,
    concurrency,
    ConcurrencyInput,
    ConcurrencyOutput,
    concurrency::concurrency,
    |o: &concurrency::ConcurrencyOutput, i| o.markdown(i),
    chart = concurrency::chart
);
scenario!(
    RemoteRead,
    remote_read,
    RemoteReadInput,
    RemoteReadOutput,
    remote_read::remote_read,
    |o: &remote_read::RemoteReadOutput, i| o.markdown(i),
    chart = remote_read::chart
);
scenario!(
    ConnectionState,
    connection_state,
    ConnectionStateInput,
    ConnectionStateOutput,
    connection_state::connection_state,
    |o: &connection_state::ConnectionStateOutput, i| o.markdown(i)
);
scenario!(Dag, dag, DagInput, DagOutput, dag::dag, |o: &dag::DagOutput, _| o.markdown());
scenario!(Slots, slots, SlotsInput, SlotsOutput, slots::slots, |o: &slots::SlotsOutput, i| o.markdown(i));
scenario!(
    Queue,
    queue,
    QueueInput,
    QueueOutput,
    queue::queue,
    |o: &queue::QueueOutput, i| o.markdown(i),
    chart = queue::chart
);
scenario!(Feedback, feedback, FeedbackInput, FeedbackOutput, feedback::feedback, |o: &feedback::FeedbackOutput, i| o
    .markdown(i));
scenario!(Incast, incast, IncastInput, IncastOutput, incast::incast, |o: &incast::IncastOutput, i| o.markdown(i));
scenario!(
    Multipath,
    multipath,
    MultipathInput,
    MultipathOutput,
    multipath::multipath,
    |o: &multipath::MultipathOutput, i| o.markdown(i)
);
scenario!(Ecmp, ecmp, EcmpInput, EcmpOutput, ecmp::ecmp, |o: &ecmp::EcmpOutput, i| o.markdown(i), chart = ecmp::chart);
scenario!(Spray, spray, SprayInput, SprayOutput, spray::spray, |o: &spray::SprayOutput, i| o.markdown(i));
scenario!(Deadlock, deadlock, DeadlockInput, DeadlockOutput, deadlock::deadlock, |o: &deadlock::DeadlockOutput, _| o
    .markdown());

const fn model<S: Scenario>(name: &'static str, about: &'static str, has_chart: bool) -> Model {
    Model { name, about, has_chart, inputs: inputs_json::<S>, evaluate: evaluate::<S> }
}

/// Every scenario model, in the order `railyard model --help` lists them.
pub const MODELS: [Model; 15] = [
    model::<Message>("message", "T = α + M/B, the αB crossover, pipeline time and utilisation", false),
    model::<EpDispatch>(
        "ep-dispatch",
        "Expert-parallel dispatch/combine traffic matrix: per sender, NIC, shared interface, cut",
        false,
    ),
    model::<NicRelay>("nic-relay", "Borrowing neighbour NICs through NVLink; issue-rate crossover", false),
    model::<Concurrency>(
        "concurrency",
        "Requests in flight: N ≥ ⌈BT/m⌉ and B_eff = min(B, Nm/T, m/δ) (--svg: B_eff vs slots)",
        true,
    ),
    model::<RemoteRead>(
        "remote-read",
        "One remote read stage by stage; fetch-vs-remote-read reuse crossover (--svg: stacked stages)",
        true,
    ),
    model::<ConnectionState>(
        "connection-state",
        "Connection state: private vs shared transport, isolation groups, cache overflow",
        false,
    ),
    model::<Dag>("dag", "Dependency graphs: finish times, critical path, slack, ordering policies, stale read", false),
    model::<Slots>("slots", "Request slots and completion processing, event by event", false),
    model::<Queue>("queue", "Periodic on/off demands into a shared egress: backlog over time (--svg: backlog)", true),
    model::<Feedback>("feedback", "Feedback delay vs buffer: fill time, drops, drain", false),
    model::<Incast>("incast", "Incast: tolerable feedback delay, PFC headroom, end-to-end bytes in flight", false),
    model::<Multipath>(
        "multipath",
        "Packets over several paths: in-order delivery, reorder buffer, selective repeat vs go-back-N",
        false,
    ),
    model::<Ecmp>(
        "ecmp",
        "ECMP hash collisions: exact distribution of the busiest uplink's load (--svg: distributions)",
        true,
    ),
    model::<Spray>("spray", "Packet spraying over paths of different delays", false),
    model::<Deadlock>("deadlock", "Wait-for graphs: cycles found and printed", false),
];

/// The model named `name`.
pub fn find(name: &str) -> Result<&'static Model, NetModelError> {
    MODELS.iter().find(|m| m.name == name).ok_or_else(|| NetModelError::BadInput {
        field: "model".into(),
        message: format!(
            "unknown model \"{name}\" (models: {})",
            MODELS.iter().map(|m| m.name).collect::<Vec<_>>().join(", ")
        ),
    })
}

/// A scenario's typed inputs: the file (every input) or the defaults, with each change.
fn read<I: DeserializeOwned + Serialize + Default>(inputs: &Inputs) -> Result<I, NetModelError> {
    let typed = |e: serde_path_to_error::Error<serde_json::Error>| {
        let path = e.path().to_string();
        NetModelError::Input {
            path: if path == "." { "(top level)".into() } else { format!("`{path}`") },
            message: e.into_inner().to_string(),
        }
    };
    if inputs.changes.is_empty() {
        return match inputs.scenario {
            Some(text) => {
                serde_path_to_error::deserialize(&mut serde_json::Deserializer::from_str(text)).map_err(typed)
            }
            None => Ok(I::default()),
        };
    }
    let mut value = match inputs.scenario {
        Some(text) => serde_json::from_str(text).map_err(|e| NetModelError::Scenario { message: e.to_string() })?,
        None => serde_json::to_value(I::default()).map_err(|e| NetModelError::Scenario { message: e.to_string() })?,
    };
    for (key, new) in inputs.changes {
        set(&mut value, key, new.clone())?;
    }
    serde_path_to_error::deserialize(value).map_err(typed)
}

fn pretty(value: &impl Serialize) -> Result<String, NetModelError> {
    serde_json::to_string_pretty(value).map_err(|e| NetModelError::Scenario { message: e.to_string() })
}

fn inputs_json<S: Scenario>(inputs: &Inputs) -> Result<String, NetModelError> {
    pretty(&read::<S::I>(inputs)?)
}

fn evaluate<S: Scenario>(inputs: &Inputs, chart: bool) -> Result<Evaluation, NetModelError> {
    let input: S::I = read(inputs)?;
    let output = S::run(&input)?;
    Ok(Evaluation {
        inputs_json: pretty(&input)?,
        output_json: pretty(&output)?,
        markdown: S::markdown(&output, &input),
        chart_svg: if chart { S::chart(&output, &input) } else { None },
    })
}

/// Set `key` (dotted: objects by field, arrays by index) of `value` to `new`.
pub fn set(value: &mut Value, key: &str, new: Value) -> Result<(), NetModelError> {
    let bad = |message: String| NetModelError::Set { key: key.to_string(), message };
    let mut at = value;
    for part in key.split('.') {
        at = match at {
            Value::Object(map) => {
                if !map.contains_key(part) {
                    let known: Vec<&String> = map.keys().collect();
                    return Err(bad(format!("no input \"{part}\" here (inputs: {known:?})")));
                }
                map.get_mut(part).ok_or_else(|| bad(format!("no input \"{part}\"")))?
            }
            Value::Array(items) => {
                let index: usize = part.parse().map_err(|_| bad(format!("\"{part}\" is not an index")))?;
                let len = items.len();
                items.get_mut(index).ok_or_else(|| bad(format!("index {index} is past the end ({len} items)")))?
            }
            _ => return Err(bad(format!("\"{part}\" goes inside a value that has no fields"))),
        };
    }
    *at = new;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_model_runs_on_its_defaults_and_changes_are_checked() {
        for m in MODELS {
            let e = m.evaluate(&Inputs::default(), true).unwrap_or_else(|e| panic!("{}: {e}", m.name));
            assert_eq!(e.chart_svg.is_some(), m.has_chart, "{}", m.name);
            assert!(!e.markdown.is_empty() && e.output_json.starts_with('{'), "{}", m.name);
        }
        let ecmp = find("ecmp").unwrap();
        let changes = [("nonesuch".to_string(), Value::from(1))];
        let err = ecmp.evaluate(&Inputs { scenario: None, changes: &changes }, false).unwrap_err();
        assert!(err.to_string().contains("nonesuch"), "{err}");
        let changes = [("slot_secs".to_string(), Value::from("4 parsecs"))];
        let err = find("concurrency").unwrap().evaluate(&Inputs { scenario: None, changes: &changes }, false);
        assert!(err.unwrap_err().to_string().contains("slot_secs"));
        assert!(find("nonesuch").is_err());
    }

    #[test]
    fn changes_descend_into_objects_and_arrays() {
        let mut v = serde_json::json!({"a": {"b": [1, 2]}});
        set(&mut v, "a.b.1", Value::from(7)).unwrap();
        assert_eq!(v["a"]["b"][1], 7);
        assert!(set(&mut v, "a.b.9", Value::from(7)).unwrap_err().to_string().contains("past the end"));
        assert!(set(&mut v, "a.b.x", Value::from(7)).unwrap_err().to_string().contains("not an index"));
        assert!(set(&mut v, "a.b.1.c", Value::from(7)).unwrap_err().to_string().contains("no fields"));
    }
}
