//! A `parley.tools.v1.ToolService` for tests, on port 0. Tools by name:
//! `search` (two progress updates, then text and a payload), `fail` (a tool
//! error), `hang` (never answers; records when the call is cancelled),
//! `meet` (waits until `meet_count` calls run at once, proving overlap;
//! a cancelled call leaves),
//! anything else echoes its input.

use std::{
    net::SocketAddr,
    pin::Pin,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::Duration,
};

use futures::Stream;
use parley_proto::{
    parser::v1::Payload,
    tools::v1::{
        ToolCall, ToolError, ToolProgress, ToolResult, ToolUpdate,
        tool_service_server::{ToolService, ToolServiceServer},
        tool_update::Update,
    },
};
use tokio::sync::{Notify, mpsc};
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tonic::{Request, Response, Status};

/// What the server saw.
#[derive(Debug, Default)]
pub struct Record {
    pub calls: Mutex<Vec<ToolCall>>,
    pub cancelled: Mutex<Vec<String>>,
    pub cancelled_notify: Notify,
}

impl Record {
    pub fn names(&self) -> Vec<String> {
        self.calls
            .lock()
            .expect("lock")
            .iter()
            .map(|c| c.name.clone())
            .collect()
    }
}

#[derive(Debug, Clone)]
struct Tools {
    record: Arc<Record>,
    meet: Arc<Meeting>,
}

/// Counts `meet` calls running right now.
#[derive(Debug)]
struct Meeting {
    needed: usize,
    active: AtomicUsize,
    /// Set once `needed` calls were running at the same time.
    met: AtomicBool,
    changed: Notify,
}

/// Leaves the meeting when the call ends (or is cancelled).
struct Attending(Arc<Meeting>);

impl Drop for Attending {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::SeqCst);
        self.0.changed.notify_waiters();
    }
}

type UpdateStream = Pin<Box<dyn Stream<Item = Result<ToolUpdate, Status>> + Send>>;

fn progress(stage: &str, fraction: f32) -> Result<ToolUpdate, Status> {
    Ok(ToolUpdate {
        update: Some(Update::Progress(ToolProgress {
            stage: stage.into(),
            message: format!("{stage}..."),
            fraction: Some(fraction),
        })),
    })
}

fn result(text: &str) -> Result<ToolUpdate, Status> {
    Ok(ToolUpdate {
        update: Some(Update::Result(ToolResult {
            text: text.into(),
            payload: None,
            error: None,
        })),
    })
}

#[tonic::async_trait]
impl ToolService for Tools {
    type ExecuteStream = UpdateStream;

    async fn execute(
        &self,
        request: Request<ToolCall>,
    ) -> Result<Response<Self::ExecuteStream>, Status> {
        let call = request.into_inner();
        self.record.calls.lock().expect("lock").push(call.clone());
        let (tx, rx) = mpsc::channel(8);
        let record = self.record.clone();
        let meet = self.meet.clone();
        tokio::spawn(async move {
            match call.name.as_str() {
                "search" => {
                    let _ = tx.send(progress("searching", 0.3)).await;
                    let _ = tx.send(progress("ranking", 0.8)).await;
                    let payload = Payload {
                        r#type: "search_results".into(),
                        data: None,
                        typed: None,
                    };
                    let done = ToolResult {
                        text: "3 results".into(),
                        payload: Some(payload),
                        error: None,
                    };
                    let _ = tx
                        .send(Ok(ToolUpdate {
                            update: Some(Update::Result(done)),
                        }))
                        .await;
                }
                "fail" => {
                    let error = ToolError {
                        message: "the index is offline".into(),
                        code: "OFFLINE".into(),
                    };
                    let failed = ToolResult {
                        text: String::new(),
                        payload: None,
                        error: Some(error),
                    };
                    let _ = tx
                        .send(Ok(ToolUpdate {
                            update: Some(Update::Result(failed)),
                        }))
                        .await;
                }
                "hang" => {
                    let _ = tx.send(progress("waiting", 0.1)).await;
                    // Resolves when the client resets the stream.
                    tx.closed().await;
                    record
                        .cancelled
                        .lock()
                        .expect("lock")
                        .push(call.call_id.clone());
                    record.cancelled_notify.notify_waiters();
                }
                "meet" => {
                    meet.active.fetch_add(1, Ordering::SeqCst);
                    let _attending = Attending(meet.clone());
                    meet.changed.notify_waiters();
                    let give_up = tokio::time::sleep(Duration::from_secs(10));
                    tokio::pin!(give_up);
                    let met = loop {
                        let changed = meet.changed.notified();
                        if meet.active.load(Ordering::SeqCst) >= meet.needed {
                            meet.met.store(true, Ordering::SeqCst);
                        }
                        if meet.met.load(Ordering::SeqCst) {
                            break true;
                        }
                        tokio::select! {
                            () = changed => {}
                            () = tx.closed() => return,
                            () = &mut give_up => break false,
                        }
                    };
                    let _ = tx.send(result(if met { "met" } else { "alone" })).await;
                }
                _ => {
                    let text = format!("{:?}", call.input);
                    let _ = tx.send(result(&text)).await;
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}

/// Starts the server; `meet_count` calls of `meet` must overlap to meet.
pub async fn start(meet_count: usize) -> (String, Arc<Record>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr: SocketAddr = listener.local_addr().expect("addr");
    let record = Arc::new(Record::default());
    let meet = Arc::new(Meeting {
        needed: meet_count,
        active: AtomicUsize::new(0),
        met: AtomicBool::new(false),
        changed: Notify::new(),
    });
    let tools = Tools {
        record: record.clone(),
        meet,
    };
    tokio::spawn(async move {
        let _ = tonic::transport::Server::builder()
            .add_service(ToolServiceServer::new(tools))
            .serve_with_incoming(TcpListenerStream::new(listener))
            .await;
    });
    (format!("http://{addr}"), record)
}
