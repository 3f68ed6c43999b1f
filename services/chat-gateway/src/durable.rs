//! What makes a turn a durable object across replicas, below the turn
//! that uses it: the turn's [`journal`] (its wire events, released to
//! clients once stored), the [`eventlog`] that stores the journals of this
//! replica's turns in batches, the [`manager`] of the turns running here
//! (one per conversation, stopped on request), [`follow`]ing a turn's
//! events wherever it runs, and the [`streams`] a client holds open.
//!
//! A turn is a durable object in the store: the database allows one running
//! turn per conversation, the turn's replica holds a lease on it, and its
//! wire events are stored as clients receive them. So any replica can
//! refuse a second turn, stop the turn (`CancelTurn`), follow it
//! (`ResumeTurn`), and end it when its replica died
//! ([`crate::engine`] does each, with these parts).

pub mod eventlog;
pub mod follow;
pub mod journal;
pub mod manager;
pub mod streams;

pub use follow::EventStream;
