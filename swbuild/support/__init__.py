"""The ground floor: errors, C names, progress lines, allocator and BLAS settings, the cache
directory, output locks and the version. Imports nothing else of swbuild."""
