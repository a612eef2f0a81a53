//! Every scenario model by name, with JSON in and out: the defaults (the chapter's worked
//! example), overridden field by field, and the output. For callers that pick a model
//! at run time (the Python package's `railyard.model("ecmp", flows=32)`).

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::error::NetModelError;
use crate::{
    concurrency, connection_state, dag, deadlock, ecmp, ep_dispatch, feedback, incast, message, multipath, nic_relay,
    queue, remote_read, slots, spray,
};

/// The models `run` knows, as `railyard model NAME` names them.
pub const MODELS: [&str; 15] = [
    "message",
    "ep-dispatch",
    "nic-relay",
    "concurrency",
    "remote-read",
    "connection-state",
    "dag",
    "slots",
    "queue",
    "feedback",
    "incast",
    "multipath",
    "ecmp",
    "spray",
    "deadlock",
];

fn bad(field: &str, message: impl Into<String>) -> NetModelError {
    NetModelError::BadInput { field: field.to_string(), message: message.into() }
}

fn with<I, O>(
    overrides: &serde_json::Map<String, Value>,
    model: impl Fn(&I) -> Result<O, NetModelError>,
) -> Result<(Value, Value), NetModelError>
where
    I: DeserializeOwned + Serialize + Default,
    O: Serialize,
{
    let mut value = serde_json::to_value(I::default()).map_err(|e| bad("(defaults)", e.to_string()))?;
    let Value::Object(fields) = &mut value else {
        return Err(bad("(defaults)", "not an object"));
    };
    for (key, v) in overrides {
        match fields.get_mut(key) {
            Some(slot) => *slot = v.clone(),
            None => {
                let known: Vec<&String> = fields.keys().collect();
                return Err(bad(key, format!("no such input (inputs: {known:?})")));
            }
        }
    }
    let input: I = serde_path_to_error::deserialize(value.clone()).map_err(|e| {
        let path = e.path().to_string();
        bad(&path, e.into_inner().to_string())
    })?;
    let output = model(&input)?;
    let output = serde_json::to_value(output).map_err(|e| bad("(output)", e.to_string()))?;
    Ok((value, output))
}

/// Run model `name` on its defaults with `overrides` (top-level input fields, values as
/// the scenario files take them: numbers or strings with units). Returns the inputs used
/// and the output.
pub fn run(name: &str, overrides: &serde_json::Map<String, Value>) -> Result<(Value, Value), NetModelError> {
    match name {
        "message" => with(overrides, message::message),
        "ep-dispatch" => with(overrides, ep_dispatch::ep_dispatch),
        "nic-relay" => with(overrides, nic_relay::nic_relay),
        "concurrency" => with(overrides, concurrency::concurrency),
        "remote-read" => with(overrides, remote_read::remote_read),
        "connection-state" => with(overrides, connection_state::connection_state),
        "dag" => with(overrides, dag::dag),
        "slots" => with(overrides, slots::slots),
        "queue" => with(overrides, queue::queue),
        "feedback" => with(overrides, feedback::feedback),
        "incast" => with(overrides, incast::incast),
        "multipath" => with(overrides, multipath::multipath),
        "ecmp" => with(overrides, ecmp::ecmp),
        "spray" => with(overrides, spray::spray),
        "deadlock" => with(overrides, deadlock::deadlock),
        _ => Err(bad("model", format!("unknown model \"{name}\" (models: {})", MODELS.join(", ")))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_model_runs_on_its_defaults_and_overrides_are_checked() {
        for name in MODELS {
            run(name, &serde_json::Map::new()).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        let mut o = serde_json::Map::new();
        o.insert("nonesuch".into(), Value::from(1));
        assert!(run("ecmp", &o).unwrap_err().to_string().contains("nonesuch"));
        let mut o = serde_json::Map::new();
        o.insert("slot_secs".into(), Value::from("4 parsecs"));
        assert!(run("concurrency", &o).unwrap_err().to_string().contains("slot_secs"));
        assert!(run("nonesuch", &serde_json::Map::new()).is_err());
    }
}
