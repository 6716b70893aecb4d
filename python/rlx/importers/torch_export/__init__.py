"""Importing ``torch.export`` programs as rlx HIR modules (the entry point is
:mod:`rlx.importers.torch`): :mod:`.program` reads the program, :mod:`.probe` evaluates
what it computes from sizes alone, :mod:`.blocks` and :mod:`.layer` recognize HIR blocks,
``ops_*`` convert the other ATen ops, :mod:`.importer` walks the graph."""
