pub fn hello(){}
