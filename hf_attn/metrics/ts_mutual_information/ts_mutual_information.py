"""Tutek & Šnajder 2020 Table 2 (mutual information between input embeddings and hidden states,
after Voita et al. 2019). Thin wrapper over ``clustered_mutual_information`` of
``_hf_attn_measures.py``, shipped beside this script: the copy of
``hf_attn.batteries.ts.clustered_mutual_information`` (scikit-learn), so the module runs without
hf_attn."""

import datasets
import evaluate
# (every top-level import is listed so that evaluate checks it is installed)
import numpy
# MiniBatchKMeans and mutual_info_score
import sklearn

from ._hf_attn_measures import check_whole, clustered_mutual_information, report_undefined

_DESCRIPTION = """Clusters the input embeddings e_t and the hidden states h_t of the same token
occurrences separately with MiniBatchKMeans (T&Š §3.4: k = 1000, batch size 100) and returns the
mutual information of the two cluster labelings in nats (sklearn.metrics.mutual_info_score).
Higher = the hidden states keep more of their input."""

_KWARGS = """
Args:
    input_vectors: e_t of each occurrence (d floats).
    hidden_vectors: h_t of the same occurrences, row-aligned (D floats).
    n_clusters: k (default 1000), batch_size: k-means mini-batch (default 100), seed.
Returns:
    mutual_information (nats), occurrences, undefined ({name: why} for every value that is None:
    none here).
"""

_CITATION = """@inproceedings{tutek-snajder-2020-staying,
  title = {Staying True to Your Word: (How) Can Attention Become Explanation?},
  author = {Tutek, Martin and {\\v{S}}najder, Jan},
  booktitle = {Proceedings of the 5th Workshop on Representation Learning for NLP},
  year = {2020}, pages = {131--142}}"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS)
class TsMutualInformation(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION, citation=_CITATION, inputs_description=_KWARGS,
            features=datasets.Features({
                "input_vectors": datasets.Sequence(datasets.Value("float32")),
                "hidden_vectors": datasets.Sequence(datasets.Value("float32"))}),
            reference_urls=["https://aclanthology.org/2020.repl4nlp-1.17/",
                            "https://aclanthology.org/D19-1448/"])

    def _compute(self, input_vectors, hidden_vectors, n_clusters=1000, batch_size=100, seed=0):
        check_whole("n_clusters", n_clusters, 1, limit="clusters")
        check_whole("batch_size", batch_size, 1, limit="batch_size")
        inputs = numpy.asarray(input_vectors, dtype=numpy.float32)
        hidden = numpy.asarray(hidden_vectors, dtype=numpy.float32)
        return report_undefined({"mutual_information": clustered_mutual_information(inputs, hidden, n_clusters,
                                                                                    batch_size, seed),
                                 "occurrences": int(len(inputs))}, {})
