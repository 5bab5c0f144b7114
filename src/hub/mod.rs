pub mod leader;
