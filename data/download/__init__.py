"""``vista-distill data fetch``: the catalogue's types (:mod:`.catalogue`; each benchmark's entry lives in its module
under :mod:`..benchmarks`), the byte mover (:mod:`.downloader`) and the fetcher (:mod:`.fetch`)."""
