"""The command line, a face: parsing, one module per verb (``commands``), completion, output."""
