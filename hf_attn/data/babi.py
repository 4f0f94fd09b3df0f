"""Question answering data for Jain & Wallace 2019's QA experiments (§3: bAbI tasks 1–3, CNN).

Each task is a sentence-pair task (``premise`` = the passage, the attended text; ``hypothesis`` =
the question, the conditioning text; ``label`` = the answer's index in ``label_names``), so the pair
model, its ``Trainer`` path and the pair J&W battery run on it unchanged.

* :func:`generate_babi` — a seeded, deterministic simulator of bAbI tasks 1–3 written from the task
  definitions of Weston et al. 2015, "Towards AI-Complete Question Answering: A Set of Prerequisite
  Toy Tasks" (§3, tasks 1 "Single Supporting Fact", 2 "Two Supporting Facts", 3 "Three Supporting
  Facts"): four actors move between six places and pick up / drop three objects; a question is asked
  only when the story so far answers it. **Generated bAbI-style data, not the released bAbI files**:
  every :class:`~hf_attn.data.tasks.TaskData` it makes says so in its notes, and its name ends in
  ``-generated``. Sizes follow the released "1k" set (1,000 train and 1,000 test questions per task;
  J&W Table 1 used the 10k set, ``train_size=10_000``); the dev split is carved from train with the
  seed.
* :func:`load_babi_folder` — the released files (``tasks_1-20_v1-2/en/qa1_single-supporting-fact_
  {train,test}.txt``, or ``en-10k``), parsed as in J&W's preprocessing: the passage is the story's
  statements up to the question (earlier questions left out), the question without its ``?``.
* :func:`load_cnn_folder` — CNN (Hermann et al. 2015, "Teaching Machines to Read and Comprehend"): the
  DeepMind ``.question`` files (``questions/{training,validation,test}/*.question``: URL, passage,
  cloze question with ``@placeholder``, answer entity, entity map) or J&W's CSV (columns
  ``paragraph``, ``question``, ``answer``, ``exp_split`` ∈ train/dev/test).

Answers are classes: for bAbI the answer words (the six places for generated data), for CNN the
anonymised entity ids (``@entity0`` …). J&W restrict the CNN output to the entities of the passage;
here every entity id of the data is a class (the model learns which ones occur).
"""

from __future__ import annotations

import csv
import glob
import os
import random
import re
from dataclasses import dataclass

import numpy as np
from datasets import Dataset, DatasetDict

from hf_attn.data.task import DataError, TaskData

GENERATED_NOTE = "generated bAbI-style data, not the released bAbI files"
BABI_TASK_FILES = {1: "qa1_single-supporting-fact", 2: "qa2_two-supporting-facts",
                   3: "qa3_three-supporting-facts"}
BABI_TASK_NAMES = {1: "single supporting fact", 2: "two supporting facts", 3: "three supporting facts"}
# The released bAbI vocabulary for tasks 1–3 (Weston et al. 2015 simulator, English).
ACTORS = ("Mary", "John", "Sandra", "Daniel")
PLACES = ("bathroom", "bedroom", "garden", "hallway", "kitchen", "office")
OBJECTS = ("apple", "football", "milk")
MOVE_VERBS = ("moved to", "went to", "journeyed to", "travelled to", "went back to")
GET_VERBS = ("got", "grabbed", "picked up", "took")
DROP_VERBS = ("dropped", "discarded", "put down", "left")
# Questions per story and statements before each question (released 1k files: task 1 has 5
# questions after every 2 statements; tasks 2–3 have longer stories, hence the longer passages
# of J&W Table 1: 8 / 67 / 421 tokens on average).
_STORY_SHAPE = {1: (5, (2, 2)), 2: (5, (2, 8)), 3: (5, (8, 20))}
_MAX_STATEMENTS = 68
QA_DATASETS = ("babi1", "babi2", "babi3", "babi1-10k", "babi2-10k", "babi3-10k", "cnn-qa")


@dataclass
class QAExample:
    """One question: the passage (statements so far, in order), the question and its answer;
    ``support`` = indices into ``statements`` of the supporting facts."""

    statements: list[str]
    question: str
    answer: str
    support: tuple[int, ...]

    @property
    def passage(self) -> str:
        return " ".join(s + "." for s in self.statements)


# ----------------------------------------------------------------------------------------------
# the simulator (Weston et al. 2015, tasks 1–3)


class _World:
    """Actors' places, objects' holders/places, and each object's place history (for task 3)."""

    def __init__(self, rng: random.Random, task: int):
        self.rng, self.task = rng, task
        self.statements: list[str] = []
        self.actor_place: dict[str, tuple[str, int]] = {}  # actor → (place, statement index)
        self.holding: dict[str, tuple[str, int]] = {}  # object → (actor, statement index of the get)
        # object → (place, statement index of the drop, index of the holder's last move before it)
        self.dropped: dict[str, tuple[str, int, int]] = {}
        # object → [(place, statement index that put it there)], consecutive duplicates merged
        self.history: dict[str, list[tuple[str, int]]] = {}

    def _say(self, text: str) -> int:
        self.statements.append(text)
        return len(self.statements) - 1

    def _carried(self, actor: str) -> list[str]:
        return [o for o, (a, _) in self.holding.items() if a == actor]

    def _record(self, obj: str, place: str, index: int) -> None:
        trail = self.history.setdefault(obj, [])
        if not trail or trail[-1][0] != place:
            trail.append((place, index))

    def move(self) -> None:
        rng = self.rng
        actor = rng.choice(ACTORS)
        here = self.actor_place.get(actor, (None, -1))[0]
        place = rng.choice([p for p in PLACES if p != here])
        index = self._say(f"{actor} {rng.choice(MOVE_VERBS)} the {place}")
        self.actor_place[actor] = (place, index)
        for obj in self._carried(actor):
            self._record(obj, place, index)

    def get(self) -> bool:
        rng = self.rng
        free = [o for o in OBJECTS if o not in self.holding]
        placed = [a for a in ACTORS if a in self.actor_place]
        if not free or not placed:
            return False
        actor = rng.choice(placed)
        place = self.actor_place[actor][0]
        # an object already dropped somewhere can only be taken where it lies
        candidates = [o for o in free if o not in self.dropped or self.dropped[o][0] == place]
        if not candidates:
            return False
        obj = rng.choice(candidates)
        index = self._say(f"{actor} {rng.choice(GET_VERBS)} the {obj} there")
        self.holding[obj] = (actor, index)
        self.dropped.pop(obj, None)
        self._record(obj, place, index)
        return True

    def drop(self) -> bool:
        if not self.holding:
            return False
        obj = self.rng.choice(sorted(self.holding))
        actor = self.holding.pop(obj)[0]
        index = self._say(f"{actor} {self.rng.choice(DROP_VERBS)} the {obj}")
        place, moved = self.actor_place[actor]
        self.dropped[obj] = (place, index, moved)
        return True

    def step(self) -> None:
        if self.task == 1:
            self.move()
            return
        draw = self.rng.random()
        if draw < 0.2 and self.get():
            return
        if draw > 0.88 and self.drop():
            return
        self.move()

    # questions ---------------------------------------------------------------------------
    def question(self) -> tuple[str, str, tuple[int, ...]] | None:
        """A question the story so far answers (with its supporting statements), or None."""
        rng = self.rng
        if self.task == 1:
            known = sorted(self.actor_place)
            if not known:
                return None
            actor = rng.choice(known)
            place, index = self.actor_place[actor]
            return f"Where is {actor}", place, (index,)
        if self.task == 2:
            options = []
            for obj, (actor, got) in self.holding.items():
                place, moved = self.actor_place[actor]
                options.append((obj, place, tuple(sorted({got, moved}))))
            for obj, (place, dropped, moved) in self.dropped.items():
                options.append((obj, place, tuple(sorted({moved, dropped}))))
            if not options:
                return None
            obj, place, support = rng.choice(sorted(options))
            return f"Where is the {obj}", place, support
        options = []
        for obj, trail in self.history.items():
            places = [p for p, _ in trail]
            for i in range(1, len(trail)):
                if places.count(places[i]) == 1 and places.count(places[i - 1]) == 1:
                    options.append((obj, places[i], places[i - 1], (trail[i - 1][1], trail[i][1])))
        if not options:
            return None
        obj, later, earlier, support = rng.choice(sorted(options))
        return f"Where was the {obj} before the {later}", earlier, support


def _story(rng: random.Random, task: int) -> list[QAExample]:
    questions, (low, high) = _STORY_SHAPE[task]
    world = _World(rng, task)
    examples: list[QAExample] = []
    # a story ends after its questions or, for a question the world rarely allows (task 3), after
    # _MAX_STATEMENTS statements (so that every passage fits 512 tokens)
    while len(examples) < questions and len(world.statements) < _MAX_STATEMENTS:
        for _ in range(rng.randint(low, high)):
            if len(world.statements) >= _MAX_STATEMENTS:
                break
            world.step()
        asked = world.question()
        if asked is None:
            continue
        question, answer, support = asked
        examples.append(QAExample(list(world.statements), question, answer, support))
    return examples


def generate_babi(task: int, size: int, seed: int = 0) -> list[QAExample]:
    """``size`` questions of bAbI task ``task`` (1, 2 or 3) from stories of five questions each,
    drawn with ``random.Random`` seeded by ``(task, seed)``: the same arguments give the same
    questions on every machine. Generated bAbI-style data (:data:`GENERATED_NOTE`)."""
    if task not in BABI_TASK_FILES:
        raise ValueError(f"bAbI task must be 1, 2 or 3, got {task!r}")
    if int(size) < 1:
        raise ValueError(f"size must be >= 1, got {size}")
    rng = random.Random(f"babi-task{task}-seed{seed}")
    examples: list[QAExample] = []
    while len(examples) < size:
        examples.extend(_story(rng, task))
    return examples[:size]


# ----------------------------------------------------------------------------------------------
# TaskData


def _carve_dev(n: int, seed: int, fraction: float = 0.1) -> tuple[np.ndarray, np.ndarray]:
    dev = max(1, int(round(n * fraction)))
    if dev >= n:
        raise DataError(f"need at least 2 training questions to carve a dev split, got {n}")
    order = np.random.default_rng(seed).permutation(n)
    return np.sort(order[dev:]), np.sort(order[:dev])


def _qa_task(train: list[tuple[str, str, str]], test: list[tuple[str, str, str]], name: str,
             notes: list[str], seed: int, validation: list[tuple[str, str, str]] | None = None,
             labels: list[str] | None = None) -> TaskData:
    """(passage, question, answer) rows → :class:`TaskData` with a dev split carved from train
    (10 %, seeded) unless ``validation`` is given; classes = ``labels`` or every answer seen."""
    split_seed = seed if validation is None else None
    if validation is None:
        keep, dev = _carve_dev(len(train), seed)
        validation = [train[i] for i in dev]
        train = [train[i] for i in keep]
        notes = [*notes, f"dev split: {len(validation)} questions carved from train with seed {seed} "
                         f"(train {len(train)})"]
    names = labels or sorted({a for rows in (train, validation, test) for _, _, a in rows},
                             key=_answer_order)
    index = {a: i for i, a in enumerate(names)}

    def columns(rows):
        return {"premise": [p for p, _, _ in rows], "hypothesis": [q for _, q, _ in rows],
                "label": [index[a] for _, _, a in rows]}

    splits = DatasetDict({"train": Dataset.from_dict(columns(train)),
                          "validation": Dataset.from_dict(columns(validation)),
                          "test": Dataset.from_dict(columns(test))})
    return TaskData(splits, names, name, notes=notes, split_seed=split_seed)


def _answer_order(answer: str):
    match = re.fullmatch(r"@entity(\d+)", answer)
    return (0, int(match.group(1)), "") if match else (1, 0, answer)


def _rows(examples: list[QAExample]) -> list[tuple[str, str, str]]:
    return [(e.passage, e.question, e.answer) for e in examples]


def babi_dataset_task(name: str) -> tuple[int, int]:
    """``babi2`` → (2, 1000); ``babi3-10k`` → (3, 10000)."""
    match = re.fullmatch(r"babi([123])(-10k)?", name)
    if not match:
        raise DataError(f"not a bAbI dataset name: {name!r} (babi1, babi2, babi3, babi1-10k, …)")
    return int(match.group(1)), 10_000 if match.group(2) else 1_000


def load_generated_babi(task: int, train_size: int = 1000, test_size: int = 1000,
                        seed: int = 0) -> TaskData:
    """Generated bAbI task ``task``: ``train_size`` questions (a 10 % dev split carved from them with
    ``seed``) and ``test_size`` test questions, from independent seeds. The name is
    ``babi{task}-generated``; the first note says :data:`GENERATED_NOTE`."""
    train = generate_babi(task, train_size, seed=2 * seed)
    test = generate_babi(task, test_size, seed=2 * seed + 1)
    notes = [GENERATED_NOTE,
             f"bAbI task {task} ({BABI_TASK_NAMES[task]}) from hf_attn's simulator of Weston et al. 2015's "
             f"task definition: {train_size} train / {test_size} test questions, seed {seed}"]
    return _qa_task(_rows(train), _rows(test), f"babi{task}-generated", notes, seed, labels=sorted(PLACES))


# ----------------------------------------------------------------------------------------------
# the released bAbI files


def parse_babi_file(path: str) -> list[QAExample]:
    """A released bAbI file (``ID text`` lines; a question line is ``ID question?\\tanswer\\tsupport``;
    ID 1 starts a story) → one :class:`QAExample` per question, the passage being the story's
    statements so far (J&W's preprocessing)."""
    examples: list[QAExample] = []
    statements: list[str] = []
    line_to_statement: dict[int, int] = {}
    with open(path, encoding="utf-8") as f:
        for number, raw in enumerate(f, 1):
            line = raw.rstrip("\n")
            if not line.strip():
                continue
            head, _, text = line.partition(" ")
            if not head.isdigit() or not text:
                raise DataError(f"{path}:{number}: not a bAbI line (ID text): {line[:60]!r}")
            line_id = int(head)
            if line_id == 1:
                statements, line_to_statement = [], {}
            if "\t" in text:
                parts = [p.strip() for p in text.split("\t")]
                if len(parts) < 2 or not parts[1]:
                    raise DataError(f"{path}:{number}: a question line needs 'question?<TAB>answer'")
                question = parts[0].rstrip("?").strip()
                support = tuple(line_to_statement[int(s)] for s in (parts[2].split() if len(parts) > 2 else [])
                                if s.isdigit() and int(s) in line_to_statement)
                if not statements:
                    raise DataError(f"{path}:{number}: a question before any statement")
                examples.append(QAExample(list(statements), question, parts[1], support))
            else:
                line_to_statement[line_id] = len(statements)
                statements.append(text.strip().rstrip("."))
    if not examples:
        raise DataError(f"{path}: no questions")
    return examples


def find_babi_files(path: str, task: int, ten_k: bool = False) -> tuple[str, str]:
    """The train and test files of ``task`` under ``path``: the folder holding them, ``en``/
    ``en-10k`` below it, or ``tasks_1-20_v1-2/en`` below that."""
    stem = BABI_TASK_FILES[task]
    sub = "en-10k" if ten_k else "en"
    for folder in (path, os.path.join(path, sub), os.path.join(path, "tasks_1-20_v1-2", sub)):
        train, test = (os.path.join(folder, f"{stem}_{s}.txt") for s in ("train", "test"))
        if os.path.isfile(train) and os.path.isfile(test):
            return train, test
    raise FileNotFoundError(f"no {stem}_train.txt / {stem}_test.txt in {path} (nor in {sub}/ or "
                            f"tasks_1-20_v1-2/{sub}/ below it): give the bAbI folder "
                            f"(tasks_1-20_v1-2/{sub})")


def load_babi_folder(path: str | os.PathLike, task: int, seed: int = 0, ten_k: bool = False) -> TaskData:
    """The released bAbI task ``task`` from ``path`` (see :func:`find_babi_files`); a 10 % dev split
    carved from train with ``seed`` (the release has no dev split)."""
    train_file, test_file = find_babi_files(os.fspath(path), task, ten_k)
    notes = [f"released bAbI files (Weston et al. 2015): {train_file}, {test_file}"]
    return _qa_task(_rows(parse_babi_file(train_file)), _rows(parse_babi_file(test_file)),
                    f"babi{task}" + ("-10k" if ten_k else ""), notes, seed)


# ----------------------------------------------------------------------------------------------
# CNN (Hermann et al. 2015)

CNN_SPLIT_FOLDERS = {"train": "training", "validation": "validation", "test": "test"}
JW_CNN_SPLITS = {"train": "train", "dev": "validation", "test": "test"}


def parse_cnn_question(path: str) -> tuple[str, str, str]:
    """A DeepMind ``.question`` file → (passage, question, answer entity). Blocks separated by blank
    lines: URL, passage, question (with ``@placeholder``), answer, entity map."""
    with open(path, encoding="utf-8") as f:
        blocks = [b.strip() for b in re.split(r"\n\s*\n", f.read().strip())]
    if len(blocks) < 4:
        raise DataError(f"{path}: a .question file has URL, passage, question and answer blocks "
                        f"separated by blank lines; found {len(blocks)} block(s)")
    passage, question, answer = blocks[1], blocks[2], blocks[3].split()[0] if blocks[3] else ""
    if not passage or not question or not answer:
        raise DataError(f"{path}: empty passage, question or answer")
    return passage, question, answer


def load_cnn_folder(path: str | os.PathLike, seed: int = 0, max_per_split: int | None = None) -> TaskData:
    """CNN from ``path``: a folder with ``{training,validation,test}/*.question`` (or ``questions/``
    above them), or J&W's CSV (``paragraph``, ``question``, ``answer``, ``exp_split``). Files are read
    in sorted order; ``max_per_split`` keeps the first ones (the full set is 380k questions)."""
    path = os.fspath(path)
    rows: dict[str, list[tuple[str, str, str]]] = {}
    if os.path.isfile(path):
        with open(path, encoding="utf-8", newline="") as f:
            reader = csv.DictReader(f)
            missing = {"paragraph", "question", "answer", "exp_split"} - set(reader.fieldnames or [])
            if missing:
                raise DataError(f"{path}: J&W's CNN CSV needs columns paragraph, question, answer, "
                                f"exp_split; missing {sorted(missing)}")
            for number, record in enumerate(reader, 2):
                split = JW_CNN_SPLITS.get(record["exp_split"])
                if split is None:
                    raise DataError(f"{path}:{number}: exp_split must be train, dev or test, got "
                                    f"{record['exp_split']!r}")
                if max_per_split is None or len(rows.get(split, [])) < max_per_split:
                    rows.setdefault(split, []).append((record["paragraph"], record["question"],
                                                       record["answer"].strip()))
        where = f"J&W's CNN CSV {path}"
    else:
        base = os.path.join(path, "questions") if os.path.isdir(os.path.join(path, "questions")) else path
        for split, folder in CNN_SPLIT_FOLDERS.items():
            files = sorted(glob.glob(os.path.join(base, folder, "*.question")))
            if max_per_split is not None:
                files = files[:max_per_split]
            if files:
                rows[split] = [parse_cnn_question(f) for f in files]
        where = f"DeepMind CNN questions in {base}"
    if "train" not in rows or "test" not in rows:
        raise FileNotFoundError(f"no CNN train and test questions in {path}: give the folder holding "
                                f"training/, validation/, test/ with .question files, or J&W's CSV")
    notes = [f"CNN (Hermann et al. 2015): {where}"]
    return _qa_task(rows["train"], rows["test"], "cnn-qa", notes, seed, validation=rows.get("validation"))


# ----------------------------------------------------------------------------------------------


def load_qa_task(name: str, data_path: str | None = None, seed: int = 0) -> TaskData:
    """``babi1``–``babi3`` (1k) / ``babi1-10k``–``babi3-10k``: the released files under ``data_path``
    if given, else generated bAbI-style data; ``cnn-qa``: the CNN folder or CSV at ``data_path``."""
    if name == "cnn-qa":
        if data_path is None:
            raise DataError("cnn-qa needs --data-path: the DeepMind CNN questions folder "
                            "(training/, validation/, test/ with .question files) or J&W's CNN CSV; "
                            "it is not available offline")
        return load_cnn_folder(data_path, seed=seed)
    task, size = babi_dataset_task(name)
    if data_path is not None:
        return load_babi_folder(data_path, task, seed=seed, ten_k=size == 10_000)
    return load_generated_babi(task, train_size=size, test_size=1000, seed=seed)


def is_qa_task(name: str | None) -> bool:
    """True for the QA datasets (J&W's ε = 0.05 for the adversary): bAbI (released or generated), CNN."""
    return isinstance(name, str) and (name in QA_DATASETS or bool(re.fullmatch(r"babi[123](-10k)?-generated", name)))


__all__ = ["GENERATED_NOTE", "QA_DATASETS", "QAExample", "generate_babi", "load_generated_babi",
           "parse_babi_file", "find_babi_files", "load_babi_folder", "parse_cnn_question",
           "load_cnn_folder", "load_qa_task", "is_qa_task", "babi_dataset_task"]
