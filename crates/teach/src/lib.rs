//! What the product teaches with the user's own machine: the serving demos, each a plan, its
//! sizing and its judgement on real runs ([`demo`]), and the lessons that walk through them
//! ([`lesson`]).

pub mod demo;
pub mod lesson;
