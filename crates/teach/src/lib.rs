//! What the product teaches with the user's own machine: the serving demos, each a plan, its
//! sizing, its judgement on real runs and its lesson ([`demo`]); what a lesson is
//! ([`lesson`]); and the handout of one lesson's runs from many machines ([`handout`]).

pub mod demo;
pub mod lesson;
pub mod handout;
