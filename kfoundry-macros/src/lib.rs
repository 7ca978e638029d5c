use proc_macro::TokenStream;
#[proc_macro_attribute]
pub fn evolve(_attr: TokenStream, item: TokenStream) -> TokenStream { item }
