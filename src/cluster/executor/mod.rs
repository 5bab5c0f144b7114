//! Turns a plan into API calls that are safe to repeat and to interrupt. (To be built.)
