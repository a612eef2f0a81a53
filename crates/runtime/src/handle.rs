//! Asynchronous calls: an `AsyncCommunicator` owns a communicator on a worker thread;
//! each call queues a job (with owned buffers) and returns a `Handle` whose `wait()`
//! blocks for the result and whose `test()` polls it. Jobs run in submission order —
//! the same order on every rank, as collectives require. The queue is bounded.

use std::sync::mpsc::{self, Receiver, SyncSender, TryRecvError};
use std::thread::JoinHandle;

use railyard_schedule::{Algorithm, CollectiveSpec, Dtype};

use crate::comm::Communicator;
use crate::error::CommError;
use crate::reduce::RedOp;

/// Calls that may wait in the queue at once.
pub const MAX_QUEUED_CALLS: usize = 64;

struct Job {
    spec: CollectiveSpec,
    algorithm: Option<Algorithm>,
    input: Vec<u8>,
    output: Vec<u8>,
    dtype: Dtype,
    op: RedOp,
    done: SyncSender<Result<Vec<u8>, CommError>>,
}

pub struct AsyncCommunicator {
    rank: usize,
    size: usize,
    jobs: Option<SyncSender<Job>>,
    worker: Option<JoinHandle<Communicator>>,
}

/// The result of one queued call: the output buffer.
pub struct Handle {
    rx: Receiver<Result<Vec<u8>, CommError>>,
    result: Option<Result<Vec<u8>, CommError>>,
}

impl Handle {
    /// Block until the call finished; its output bytes or its error.
    pub fn wait(mut self) -> Result<Vec<u8>, CommError> {
        if let Some(r) = self.result.take() {
            return r;
        }
        self.rx
            .recv()
            .unwrap_or_else(|_| Err(CommError::BadArgs { message: "the communicator's worker stopped".into() }))
    }

    /// Whether the call finished (then `wait` returns at once).
    pub fn test(&mut self) -> bool {
        if self.result.is_some() {
            return true;
        }
        match self.rx.try_recv() {
            Ok(r) => {
                self.result = Some(r);
                true
            }
            Err(TryRecvError::Empty) => false,
            Err(TryRecvError::Disconnected) => {
                self.result = Some(Err(CommError::BadArgs { message: "the communicator's worker stopped".into() }));
                true
            }
        }
    }
}

impl AsyncCommunicator {
    pub fn new(mut comm: Communicator) -> AsyncCommunicator {
        let (rank, size) = (comm.rank(), comm.size());
        let (tx, rx) = mpsc::sync_channel::<Job>(MAX_QUEUED_CALLS);
        let worker = std::thread::spawn(move || {
            for mut job in rx {
                let r = comm
                    .run(&job.spec, job.algorithm, &job.input, &mut job.output, job.dtype, job.op)
                    .map(|()| job.output);
                // The caller may have dropped its handle; that is fine.
                let _ = job.done.send(r);
            }
            comm
        });
        AsyncCommunicator { rank, size, jobs: Some(tx), worker: Some(worker) }
    }

    pub fn rank(&self) -> usize {
        self.rank
    }

    pub fn size(&self) -> usize {
        self.size
    }

    /// Queue a call; `output_len` bytes of output come back through the handle.
    pub fn start(
        &self,
        spec: CollectiveSpec,
        algorithm: Option<Algorithm>,
        input: Vec<u8>,
        dtype: Dtype,
        op: RedOp,
    ) -> Handle {
        let output = vec![0u8; spec.output_len(self.rank) as usize * dtype.size_bytes() as usize];
        let (done, rx) = mpsc::sync_channel(1);
        let job = Job { spec, algorithm, input, output, dtype, op, done };
        if self.jobs.as_ref().is_some_and(|j| j.send(job).is_ok()) {
            Handle { rx, result: None }
        } else {
            Handle { rx, result: Some(Err(CommError::BadArgs { message: "the communicator's worker stopped".into() })) }
        }
    }

    /// Stop the worker after the queued calls and give the communicator back.
    pub fn into_inner(mut self) -> Option<Communicator> {
        self.jobs.take();
        self.worker.take().and_then(|w| w.join().ok())
    }
}

impl Drop for AsyncCommunicator {
    fn drop(&mut self) {
        self.jobs.take();
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
    }
}
