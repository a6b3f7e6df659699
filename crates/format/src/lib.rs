//! The model format: what a GGUF file holds and what is read from it, with no notion of running
//! a model. GGUF files are read and written ([`gguf`]), tokenized as llama.cpp does
//! ([`tokenizer`]), their hyper-parameters read for our own model code ([`arch`]), and
//! prompts of a chosen length built from the project's corpus ([`workload`]).

pub mod gguf;
pub mod tokenizer;
pub mod arch;
pub mod workload;
