//! Routing a connection's `notifications/progress` to the running calls.
//!
//! The SDK gives every request of a connection its own progress token (a
//! counter, never reused on that connection), and hands notifications to
//! the client handler in tasks of their own. So a notification can reach
//! the handler before the call that owns it has registered its token (the
//! call task was not scheduled yet after writing its request), or after the
//! call ended. Each connection has its own routes (a restarted server's
//! counter starts again, and a late notification of the old process must
//! not reach a call on the new one). A notification whose token is not
//! registered waits in a small bounded buffer: the call that registers that
//! token next gets it; a call that already ended never registers again, so
//! its late notifications are dropped when newer ones push them out. No
//! notification is attributed to a call other than the one that sent its
//! token, and nothing grows without bound.

use std::{
    collections::{HashMap, VecDeque},
    sync::{Arc, Mutex, PoisonError},
};

use rmcp::model::{ProgressNotificationParam, ProgressToken};

use crate::tools::ProgressSender;

/// How many notifications with an unknown token are kept per connection.
pub const MAX_EARLY_PROGRESS: usize = 32;

/// One connection's progress routes.
#[derive(Debug, Default)]
pub struct ProgressRoutes {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    routes: HashMap<ProgressToken, ProgressSender>,
    early: VecDeque<ProgressNotificationParam>,
}

impl ProgressRoutes {
    /// Where `params` goes: the sender of its call, or `None` (kept for a
    /// call that has not registered yet).
    pub fn route(&self, params: ProgressNotificationParam) -> Option<(ProgressSender, Progress)> {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(sender) = inner.routes.get(&params.progress_token) {
            return Some((sender.clone(), Progress::from(params)));
        }
        if inner.early.len() >= MAX_EARLY_PROGRESS {
            inner.early.pop_front();
        }
        inner.early.push_back(params);
        None
    }

    /// Routes `token` to `sender` while the returned guard lives; returns
    /// the notifications that arrived for it before, oldest first.
    pub fn add(
        self: &Arc<Self>,
        token: ProgressToken,
        sender: ProgressSender,
    ) -> (Route, Vec<Progress>) {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let mut early = Vec::new();
        inner.early.retain(|params| {
            if params.progress_token == token {
                early.push(Progress::from(params.clone()));
                false
            } else {
                true
            }
        });
        inner.routes.insert(token.clone(), sender);
        let route = Route {
            routes: self.clone(),
            token,
        };
        (route, early)
    }

    /// Calls registered now.
    pub fn registered(&self) -> usize {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .routes
            .len()
    }

    /// Notifications waiting for a call to register.
    pub fn waiting(&self) -> usize {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .early
            .len()
    }
}

/// Keeps a call's token routed; dropping it (the call ended, was cancelled
/// or timed out) removes the route.
#[derive(Debug)]
pub struct Route {
    routes: Arc<ProgressRoutes>,
    token: ProgressToken,
}

impl Drop for Route {
    fn drop(&mut self) {
        self.routes
            .inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .routes
            .remove(&self.token);
    }
}

/// One notification as a `tool_progress` report.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    /// The server's message, or `progress of total`.
    pub message: String,
    /// `progress / total` when the total is known.
    pub fraction: Option<f32>,
}

impl Progress {
    /// Sends it to `sender` as stage `progress`.
    pub async fn report(self, sender: &ProgressSender) {
        sender.report("progress", self.message, self.fraction).await;
    }
}

impl From<ProgressNotificationParam> for Progress {
    fn from(params: ProgressNotificationParam) -> Self {
        let fraction = params
            .total
            .filter(|total| *total > 0.0)
            .map(|total| (params.progress / total) as f32);
        let message = params.message.unwrap_or_else(|| match params.total {
            Some(total) => format!("{} of {total}", params.progress),
            None => format!("{}", params.progress),
        });
        Self { message, fraction }
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::NumberOrString;
    use tokio::sync::mpsc;

    use super::*;

    fn token(n: i64) -> ProgressToken {
        ProgressToken(NumberOrString::Number(n))
    }

    fn note(n: i64, step: f64) -> ProgressNotificationParam {
        ProgressNotificationParam::new(token(n), step)
            .with_total(4.0)
            .with_message(format!("call {n} step {step}"))
    }

    fn sender(
        index: usize,
    ) -> (
        ProgressSender,
        mpsc::Receiver<(usize, crate::tools::Progress)>,
    ) {
        let (tx, rx) = mpsc::channel(8);
        (ProgressSender::new(index, tx), rx)
    }

    #[test]
    fn progress_before_the_call_registered_reaches_that_call_only() {
        let routes = Arc::new(ProgressRoutes::default());
        // Two notifications for call 7 and one for call 8 arrive before
        // either call registered its token.
        assert!(routes.route(note(7, 1.0)).is_none());
        assert!(routes.route(note(8, 1.0)).is_none());
        assert!(routes.route(note(7, 2.0)).is_none());
        let (seven, _rx) = sender(0);
        let (route, early) = routes.add(token(7), seven);
        assert_eq!(
            early.iter().map(|p| p.message.as_str()).collect::<Vec<_>>(),
            ["call 7 step 1", "call 7 step 2"]
        );
        assert_eq!(early[1].fraction, Some(0.5));
        // Call 8's stays for call 8.
        assert_eq!(routes.waiting(), 1);
        let routed = routes.route(note(7, 3.0)).expect("routed");
        assert_eq!(routed.1.message, "call 7 step 3");
        drop(route);
        assert_eq!(routes.registered(), 0);
    }

    #[test]
    fn progress_after_the_call_ended_goes_nowhere_and_is_bounded() {
        let routes = Arc::new(ProgressRoutes::default());
        let (one, _rx) = sender(0);
        let (route, early) = routes.add(token(1), one);
        assert!(early.is_empty());
        drop(route);
        // Late notifications of the ended call (and any others) are kept
        // at most MAX_EARLY_PROGRESS, oldest out first.
        for n in 0..(MAX_EARLY_PROGRESS as i64 * 3) {
            assert!(routes.route(note(1, n as f64)).is_none());
        }
        assert_eq!(routes.waiting(), MAX_EARLY_PROGRESS);
        // A new call has a new token: none of them is its.
        let (two, _rx) = sender(1);
        let (_route, early) = routes.add(token(2), two);
        assert!(early.is_empty());
        assert_eq!(routes.registered(), 1);
    }

    #[tokio::test]
    async fn a_reported_progress_carries_the_calls_index() {
        let routes = Arc::new(ProgressRoutes::default());
        let (three, mut rx) = sender(3);
        let (_route, _) = routes.add(token(5), three);
        let (sender, progress) = routes.route(note(5, 1.0)).expect("routed");
        progress.report(&sender).await;
        let (index, progress) = rx.recv().await.expect("a report");
        assert_eq!(index, 3);
        assert_eq!(progress.stage, "progress");
        assert_eq!(progress.fraction, Some(0.25));
    }
}
