//! payload-parser library.
