from eosmirror.core.generation import Generation, ids_to_fence, next_generation


def test_first_run_records_generation_one():
    gen = next_generation(None, 3, 1000, "r1")
    assert (gen.number, gen.slots, gen.max_slots) == (1, 3, 3)


def test_same_slot_count_keeps_the_generation():
    assert next_generation(Generation(4, 3, 5, 0), 3, 1, "r") is None


def test_changed_slot_count_bumps_and_remembers_the_largest():
    gen = next_generation(Generation(4, 5, 5, 0), 2, 1, "r")
    assert (gen.number, gen.slots, gen.max_slots) == (5, 2, 5)
    # every id any generation used is fenced, so a zombie of the 5-slot generation is covered
    assert ids_to_fence(gen, "p", "m") == [f"p.m.{k}" for k in range(5)]


def test_encoding_round_trips():
    gen = Generation(7, 2, 4, 123, "abc")
    assert Generation.decode(gen.encode()) == gen
