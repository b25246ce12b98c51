resource "x" "y" {} # ERROR: Unsupported block type
