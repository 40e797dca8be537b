mod cli;
mod gateway;
mod turn;
