//! agent-runner library.
