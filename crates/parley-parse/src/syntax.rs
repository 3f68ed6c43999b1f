//! The syntax around elements, matched by prefix-consistent matchers:
//! [`marker`]s (`X:`, `**X**:` …) and [`fence`]s (whitespace gaps and
//! Markdown code fences). Each answers `Yes` or `No` only when no
//! continuation of the text can change the answer, so a stream can stop
//! at any byte and resume.

pub(crate) mod fence;
pub(crate) mod marker;
