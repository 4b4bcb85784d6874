"""Leaves that every layer of hfrl uses: name lookup (``registry``), the gate on names read from
files (``trust``) and the cache folder (``cache``). They import nothing of hfrl but each other."""
