"""From files to tensors: tag schemes, CoNLL reading and writing, CoNLL-03 splits, vocabularies,
batching, ELMo character ids and pretrained word vectors. Imports only the ground floor
(``nerbias.errors``, ``nerbias.fileio``)."""
