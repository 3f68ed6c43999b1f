//! Wire types ↔ domain types, at the service edge.
//!
//! A `RunRequest` becomes a [`Turn`](crate::turn::Turn) here, with every
//! problem reported as a field violation; numbered domain events become
//! `RunEvent`s on the way out. Nothing else in the crate touches the
//! generated request and event types.

pub mod event;
pub mod request;
