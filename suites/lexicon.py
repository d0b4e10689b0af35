"""Word lists for the filler prose (written for this project).

Everything here is lowercase and digit-free, and avoids the needle vocabulary
("code", "secret", "vault", "passphrase", ...), so filler can never look like a fact
a question asks about. tests/suites/test_filler.py checks these promises.
"""

from __future__ import annotations


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


def _lines(text: str) -> tuple[str, ...]:
    return tuple(line.strip() for line in text.strip().splitlines() if line.strip())


# Singular people and animals: "the <adjective> <noun>" subjects.
PEOPLE = _words("""
    fisherman teacher baker farmer carpenter gardener sailor painter shepherd miller weaver potter
    doctor nurse student merchant traveller poet musician blacksmith widow grandmother grandfather
    boy girl neighbour stranger priest mayor clerk cook tailor innkeeper ferryman hunter librarian
    shopkeeper postman soldier child beekeeper carter mason pilgrim singer scholar herdsman
    woodcutter dog cat horse goat donkey heron crow fox
""")

# Concrete things that can be carried, mended, found or sold.
THINGS = _words("""
    basket lantern letter coat ladder barrel kettle bucket blanket rope boat cart wheel fence roof
    bench table chair window door bridge wall garden field orchard loaf pie soup cheese apple pear
    plum cabbage onion bread candle book map song story scarf hat boot shovel hammer saw net sail
    kite drum fiddle flute clock mirror cup bowl jug pot sack hay firewood quilt shawl umbrella
    wagon sled pail broom spoon plate feather stone
""")

# Adjectives for people and animals.
CHARACTER = _words("""
    old young quiet tired cheerful careful patient clever gentle stubborn curious proud shy kind
    busy sleepy honest nervous restless grumpy generous thoughtful brave humble wise lonely hungry
    eager weary polite cautious lively friendly
""")

# Adjectives for things.
QUALITIES = _words("""
    old new small large heavy light wooden woollen broken battered shiny dusty narrow wide warm cold
    fresh stale sturdy fragile crooked painted faded familiar borrowed handsome plain round red blue
    green yellow brown grey
""")

# Transitive verbs as "base past third-person-present past-participle".
VERBS: tuple[tuple[str, ...], ...] = tuple(
    tuple(line.split())
    for line in _lines("""
    carry carried carries carried
    mend mended mends mended
    find found finds found
    sell sold sells sold
    buy bought buys bought
    paint painted paints painted
    clean cleaned cleans cleaned
    build built builds built
    borrow borrowed borrows borrowed
    lend lent lends lent
    lose lost loses lost
    fetch fetched fetches fetched
    polish polished polishes polished
    wrap wrapped wraps wrapped
    fill filled fills filled
    empty emptied empties emptied
    move moved moves moved
    hide hid hides hidden
    share shared shares shared
    admire admired admires admired
    inspect inspected inspects inspected
    drag dragged drags dragged
    lift lifted lifts lifted
    push pushed pushes pushed
    pull pulled pulls pulled
    sweep swept sweeps swept
    bring brought brings brought
    repair repaired repairs repaired
    weigh weighed weighs weighed
    count counted counts counted
    describe described describes described
    forget forgot forgets forgotten
    notice noticed notices noticed
    offer offered offers offered
    prepare prepared prepares prepared
    trade traded trades traded
    tie tied ties tied
    stack stacked stacks stacked
    guard guarded guards guarded
    sketch sketched sketches sketched
""")
)

# Intransitive verbs as "base past third-person-present".
MOTIONS: tuple[tuple[str, ...], ...] = tuple(
    tuple(line.split())
    for line in _lines("""
    walk walked walks
    wander wandered wanders
    rest rested rests
    wait waited waits
    sing sang sings
    laugh laughed laughs
    sleep slept sleeps
    work worked works
    linger lingered lingers
    hurry hurried hurries
    whistle whistled whistles
    listen listened listens
    pause paused pauses
    stroll strolled strolls
    sit sat sits
    dance danced dances
""")
)

PLACES = _lines("""
    by the river
    near the market
    behind the mill
    at the edge of the forest
    in the village square
    along the harbour wall
    on the hill above the town
    beside the old well
    under the chestnut tree
    at the crossroads
    inside the barn
    in the kitchen
    on the bridge
    near the church
    in the meadow
    by the lake
    on the narrow lane
    at the bakery
    in the attic
    on the porch
    beside the stream
    in the orchard
    at the ferry landing
    near the lighthouse
    in the workshop
    behind the school
    along the towpath
    in the courtyard
    at the inn
    by the gate
    on the beach
    in the valley
    at the foot of the mountain
    near the pond
    in the library
    beside the fountain
    at the railway halt
    in the greenhouse
    under the arches
    along the cliff path
""")

TIMES = _lines("""
    in the early morning
    before breakfast
    after the harvest
    at dusk
    late in the evening
    on a rainy afternoon
    during the long winter
    in late spring
    at midday
    after the storm
    on market day
    before the first frost
    while the bells rang
    at sunrise
    in the middle of summer
    on a windy night
    after supper
    before the fair
    on a quiet holiday
    when the snow melted
    during the festival
    in the autumn
    one foggy morning
    late that night
    the following week
    some years ago
    at the end of the day
    before the rain came
""")

ADVERBS = _words("""
    slowly quietly carefully happily suddenly patiently gladly eagerly gently proudly reluctantly
    cheerfully silently briskly politely calmly nervously thoughtfully boldly wearily
""")

# Things people talk or think about.
TOPICS = _lines("""
    the weather
    the price of flour
    the coming winter
    the old days
    the new road
    the harvest
    the river flooding
    a distant cousin
    the village fair
    the school play
    the broken bell
    the summer dances
    the missing goat
    the church roof
    the fishing season
    the long journey
    the noisy geese
    a letter from abroad
    the apple crop
    the mayor's hat
""")

FEELINGS = _words("""
    pleased surprised worried amused puzzled relieved delighted annoyed content uneasy grateful doubtful
""")

# Words the filler must never contain (needle, config and multi-turn vocabulary).
BANNED_WORDS: frozenset[str] = frozenset(
    _words("""
    code codes secret secrets vault passphrase password passcode key keys token pin value config
    configuration access project device account archive server locker remember record mentioned fact
""")
)
