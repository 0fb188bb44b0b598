"""One module per paper study; each calls
:func:`~identrep.experiments.registry.register_study` once. Every module here whose
name does not start with ``_`` is imported when the registry is first used, so a
new study is one new module (``_``-modules hold pieces shared by a paper's
studies)."""
