"""The task's ledger: typed step records, writing a step, reading and migrating the files."""
