//! Test support shared by the integration tests (each test uses what it needs).
#![allow(dead_code)]

pub mod bundle;
pub mod mock_llm;
