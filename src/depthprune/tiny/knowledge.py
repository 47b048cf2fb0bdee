"""The tiny world's general knowledge: the authored tables every generator reads.

Kept apart from :mod:`depthprune.tiny.world` (which draws the people, towns and species of one
seed) because these tables are fixed vocabulary, not code: jobs and their workplaces, everyday
procedures ("scripts"), animal classes and the traits their species inherit, materials and their
properties, tools and their purposes, sizes, social situations and comparison schemas. The item
generators (:mod:`depthprune.tiny.items`) and the corpus (:mod:`depthprune.tiny.corpus`) phrase
them; nothing here is random. Everything is authored for this project (no copied text).
"""

from __future__ import annotations

COLOURS = ["red", "blue", "green", "yellow", "white", "black", "grey", "brown"]
NUMBER_WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven",
                "eight", "nine", "ten", "eleven", "twelve"]
REGIONS = ["north", "south", "east", "west", "midlands"]
REGION_TEXT = {
    "north": "the cold north, where the winters are long",
    "south": "the warm south, where oranges grow",
    "east": "the east, along the sea coast",
    "west": "the west, among green hills",
    "midlands": "the midlands, in the wide river plain",
}
TOWN_SIZES = ["village", "town", "city"]
PRODUCTS = ["wool", "cheese", "bread", "pottery", "fish", "timber", "apples",
            "iron tools", "honey", "cloth", "wine", "salt"]

# Jobs: place of work, tool, what they make or do, two past-tense actions that
# only this job would do (winogrande-style), and the name of its procedure.
JOBS: dict[str, dict] = {
    "baker": dict(place="the bakery", tool="a long wooden paddle", makes="bread",
                  acts=["lit the big oven before dawn", "kneaded the dough for the morning loaves"],
                  script="Baking bread"),
    "fisher": dict(place="the harbour", tool="a wide net", makes="fish for the market",
                   acts=["rowed out past the rocks to cast the nets", "mended the torn fishing nets"],
                   script="Catching fish"),
    "tailor": dict(place="the tailor's shop", tool="a needle and thread", makes="shirts and coats",
                   acts=["sewed a new coat for the mayor", "measured the customer for a suit"],
                   script="Mending a shirt"),
    "carpenter": dict(place="the workshop", tool="a saw", makes="tables and shelves",
                      acts=["sawed the oak planks for a table", "planed the rough door until it was smooth"],
                      script="Building a shelf"),
    "smith": dict(place="the forge", tool="a heavy hammer", makes="horseshoes and nails",
                  acts=["hammered the red-hot iron on the anvil", "fitted new shoes on the farmer's horse"],
                  script="Forging a horseshoe"),
    "gardener": dict(place="the garden", tool="a spade", makes="flowers and vegetables",
                     acts=["planted a row of roses by the gate", "pulled the weeds from the flower beds"],
                     script="Planting a garden"),
    "cook": dict(place="the kitchen", tool="a sharp knife", makes="soups and stews",
                 acts=["stirred the big pot of soup", "chopped onions for the evening stew"],
                 script="Making soup"),
    "teacher": dict(place="the school", tool="a piece of chalk", makes="lessons",
                    acts=["marked the children's spelling tests", "wrote the lesson on the blackboard"],
                    script="Teaching a lesson"),
    "shepherd": dict(place="the hills", tool="a crook", makes="wool",
                     acts=["led the flock up to the high pasture", "sheared the sheep before summer"],
                     script="Shearing sheep"),
    "potter": dict(place="the pottery", tool="a wheel", makes="pots and jugs",
                   acts=["shaped a tall jug on the wheel", "fired a row of bowls in the kiln"],
                   script="Making a pot"),
    "doctor": dict(place="the clinic", tool="bandages", makes="medicine",
                   acts=["bandaged the boy's broken arm", "listened to the old man's cough"],
                   script="Treating a patient"),
    "painter": dict(place="the studio", tool="a thin brush", makes="pictures",
                    acts=["painted a picture of the harbour", "mixed blue and yellow paint on the palette"],
                    script="Painting a portrait"),
    "builder": dict(place="the building site", tool="a trowel", makes="houses and walls",
                    acts=["laid the bricks for the new wall", "mixed a bucket of mortar"],
                    script="Building a wall"),
    "messenger": dict(place="the post office", tool="a leather bag", makes="deliveries",
                      acts=["delivered the letters to every house on the street", "sorted the morning post"],
                      script="Delivering letters"),
    "farmer": dict(place="the fields", tool="a scythe", makes="wheat and barley",
                   acts=["cut the ripe wheat in the field", "drove the cart full of grain to the barn"],
                   script="Harvesting wheat"),
    "librarian": dict(place="the library", tool="a date stamp", makes="book loans",
                      acts=["stamped the date in the borrowed book", "put the returned books back on the shelves"],
                      script="Lending books"),
    "sailor": dict(place="the ship", tool="a strong rope", makes="voyages",
                   acts=["raised the sail as the wind picked up", "climbed the mast to look for land"],
                   script="Sailing a boat"),
    "miner": dict(place="the mine", tool="a pick", makes="coal",
                  acts=["swung the pick against the dark rock", "pushed the cart of coal out of the tunnel"],
                  script="Digging coal"),
}
JOB_NAMES = list(JOBS)

# Procedures ("scripts"): ordered steps in the habitual present tense.  {pos} is
# the possessive pronoun of the actor.  Used for narratives and hellaswag-style
# completion: the next step is predictable from the earlier ones.
SCRIPTS: dict[str, list[str]] = {
    "Baking bread": [
        "lights the fire in the big brick oven",
        "mixes flour, water and yeast in a wide bowl",
        "kneads the dough on the table until it is smooth",
        "covers the dough with a cloth and leaves it to rise",
        "shapes the dough into round loaves and slides them into the oven",
        "takes the brown loaves out and sets them on a rack to cool"],
    "Catching fish": [
        "walks down to the harbour before sunrise",
        "checks the nets for holes and mends the torn ones",
        "rows the little boat out past the rocks",
        "throws the net wide over the dark water",
        "pulls the heavy net back into the boat, full of silver fish",
        "rows back to the shore and sells the catch at the market"],
    "Mending a shirt": [
        "lays the torn shirt flat on the table",
        "finds a thread of the same colour as the cloth",
        "pushes the thread through the eye of the needle",
        "sews small, tight stitches along the tear",
        "ties a knot and cuts the loose thread with scissors",
        "presses the shirt with a warm iron and folds it"],
    "Building a shelf": [
        "measures the wall with a long tape",
        "saws a pine plank to the right length",
        "smooths the rough edges with sandpaper",
        "drills two holes in the wall for the brackets",
        "screws the brackets tight and lays the plank on top",
        "puts a row of books on the new shelf"],
    "Forging a horseshoe": [
        "heats a bar of iron in the glowing forge",
        "holds the red-hot bar on the anvil with tongs",
        "hammers the bar into a curved shape",
        "punches nail holes along the curve",
        "plunges the hot shoe into a bucket of water, which hisses",
        "nails the cooled shoe to the horse's hoof"],
    "Planting a garden": [
        "digs up the hard soil with a spade",
        "pulls out the weeds and the stones",
        "makes straight rows with the edge of a rake",
        "drops the seeds into the rows one by one",
        "covers the seeds with a thin layer of soil",
        "waters the rows gently with a watering can"],
    "Making soup": [
        "washes the carrots, onions and potatoes",
        "chops the vegetables into small pieces with a sharp knife",
        "fills a large pot with water and sets it on the stove",
        "drops the vegetables into the boiling water",
        "stirs the soup with a wooden spoon and adds a pinch of salt",
        "ladles the hot soup into bowls for the family"],
    "Teaching a lesson": [
        "writes the date on the blackboard with chalk",
        "asks the children to open their books",
        "reads a short story aloud to the class",
        "asks each child a question about the story",
        "hands out paper for a short test",
        "collects the papers and rings the bell for the break"],
    "Shearing sheep": [
        "leads the flock down from the hills",
        "closes the gate of the pen behind the last sheep",
        "catches one sheep and holds it still between {pos} knees",
        "cuts away the thick wool with large shears",
        "lets the sheep go, thin and cool",
        "packs the wool into sacks for the market"],
    "Making a pot": [
        "wets a lump of grey clay",
        "throws the clay onto the middle of the wheel",
        "spins the wheel with {pos} foot",
        "presses {pos} thumbs into the clay to open it",
        "pulls the walls up slowly into a tall pot",
        "sets the pot in the kiln to fire it hard"],
    "Treating a patient": [
        "greets the patient at the door of the clinic",
        "asks where it hurts",
        "looks closely at the swollen ankle",
        "presses gently around the bone",
        "wraps the ankle in a tight bandage",
        "gives the patient some medicine and says to rest for a week"],
    "Painting a portrait": [
        "sets up an easel near the window",
        "asks the sitter to keep very still",
        "sketches the outline of the face in pencil",
        "mixes the colours on a wooden palette",
        "paints the eyes and the hair with a thin brush",
        "signs {pos} name in the corner of the finished picture"],
    "Building a wall": [
        "marks a straight line on the ground with string",
        "mixes sand, lime and water into mortar",
        "lays the first row of bricks along the line",
        "spreads mortar on top with a trowel",
        "lays the next row and checks it with a level",
        "scrapes off the extra mortar and lets the wall dry"],
    "Delivering letters": [
        "collects a bag of letters from the post office",
        "sorts the letters by street",
        "sets off along the road with the heavy bag",
        "knocks on the first door",
        "hands the letters to the people who live there",
        "returns the empty bag to the post office"],
    "Harvesting wheat": [
        "sharpens the scythe on a stone",
        "cuts the golden wheat in wide strokes",
        "ties the stalks into bundles",
        "loads the bundles onto the cart",
        "drives the cart to the barn",
        "beats the bundles to free the grain"],
    "Lending books": [
        "unlocks the library in the morning",
        "dusts the long wooden shelves",
        "helps a reader find a book about the stars",
        "stamps the date inside the cover",
        "hands the book to the reader",
        "puts the returned books back in their places"],
    "Sailing a boat": [
        "unties the boat from the dock",
        "raises the white sail",
        "steers the boat out of the bay",
        "watches the wind fill the sail",
        "turns the boat back towards the harbour",
        "ties the boat to the dock with a strong rope"],
    "Digging coal": [
        "lights a lamp at the mouth of the mine",
        "climbs down the ladder into the dark",
        "swings the pick against the rock wall",
        "shovels the broken coal into a cart",
        "pushes the cart up to the surface",
        "washes the black dust from {pos} hands and face"],
    "Making tea": [
        "fills the kettle with water",
        "sets the kettle on the fire",
        "puts a spoon of tea leaves in the pot",
        "pours the boiling water over the leaves",
        "waits a few minutes for the tea to brew",
        "pours the tea into cups and adds a little milk"],
    "Washing clothes": [
        "fills a tub with warm water and soap",
        "soaks the dirty clothes in the tub",
        "scrubs each shirt on a washboard",
        "rinses the clothes in clean water",
        "wrings them out by hand",
        "hangs them on the line to dry in the sun"],
}
SCRIPT_JOB = {v["script"]: k for k, v in JOBS.items()}

# Animal classes and the traits every species of the class inherits.
CLASSES: dict[str, dict[str, str]] = {
    "fish": dict(lives="in the water", breathes="gills", covering="scales", moves="swimming",
                 limbs="fins", young="lays eggs in the water", plural="fish"),
    "bird": dict(lives="in nests in the trees", breathes="lungs", covering="feathers", moves="flying",
                 limbs="wings", young="lays eggs in a nest", plural="birds"),
    "mammal": dict(lives="in dens on land", breathes="lungs", covering="fur", moves="running",
                   limbs="four legs", young="feeds its young with milk", plural="mammals"),
    "insect": dict(lives="in the grass", breathes="air holes", covering="a hard shell", moves="crawling",
                   limbs="six legs", young="lays tiny eggs on leaves", plural="insects"),
    "reptile": dict(lives="on warm rocks", breathes="lungs", covering="leathery skin", moves="creeping",
                    limbs="four short legs", young="lays eggs in the sand", plural="reptiles"),
}
CLASS_NAMES = list(CLASSES)
# traits that are unique per class (usable as multiple-choice answers)
UNIQUE_TRAITS = ["lives", "covering", "moves", "limbs", "young"]
TRAIT_QUESTION = {
    "lives": "Where does {x} live?",
    "covering": "What is {x} covered in?",
    "moves": "How does {x} move?",
    "limbs": "What does {x} have?",
    "young": "Which of these is true of {x}?",
    "breathes": "What does {x} breathe with?",
}
DIETS = ["seeds", "leaves", "small fish", "berries", "worms", "grass", "nuts", "flies"]
SIZES = ["tiny", "small", "large"]

# Materials and their properties (True/False).
MATERIALS: dict[str, dict[str, bool]] = {
    "wood": dict(floats=True, burns=True, magnetic=False, conducts=False, transparent=False, breaks=False, soft=False),
    "cork": dict(floats=True, burns=True, magnetic=False, conducts=False, transparent=False, breaks=False, soft=True),
    "iron": dict(floats=False, burns=False, magnetic=True, conducts=True, transparent=False, breaks=False, soft=False),
    "copper": dict(floats=False, burns=False, magnetic=False, conducts=True, transparent=False, breaks=False, soft=False),
    "stone": dict(floats=False, burns=False, magnetic=False, conducts=False, transparent=False, breaks=False, soft=False),
    "glass": dict(floats=False, burns=False, magnetic=False, conducts=False, transparent=True, breaks=True, soft=False),
    "wool": dict(floats=False, burns=True, magnetic=False, conducts=False, transparent=False, breaks=False, soft=True),
    "paper": dict(floats=False, burns=True, magnetic=False, conducts=False, transparent=False, breaks=False, soft=True),
    "clay": dict(floats=False, burns=False, magnetic=False, conducts=False, transparent=False, breaks=True, soft=False),
}
MATERIAL_NAMES = list(MATERIALS)
PROPERTY_TEXT = {  # (positive statement, negative statement, question)
    "floats": ("floats on water", "sinks in water", "will float on water"),
    "burns": ("burns in a fire", "does not burn", "will burn in a fire"),
    "magnetic": ("is pulled by a magnet", "is not pulled by a magnet", "is pulled by a magnet"),
    "conducts": ("carries electricity", "does not carry electricity", "carries electricity"),
    "transparent": ("lets light through", "blocks the light", "lets light pass through it"),
    "breaks": ("breaks easily when dropped", "does not break when dropped", "breaks easily when dropped"),
    "soft": ("is soft to touch", "is hard to touch", "is soft to touch"),
}

# Tools and purposes.  Each tool has three goal frames; frames 0-1 may appear in
# training text, frame 2 is reserved for the piqa-like evaluation fixture.
TOOLS: dict[str, dict] = {
    "knife": dict(a="a knife", use="cut the bread",
                  goals=["cut a loaf of bread into slices", "slice an apple", "cut a piece of cheese"]),
    "hammer": dict(a="a hammer", use="drive in a nail",
                   goals=["fix a loose nail in the floor", "hang a picture on a nail", "knock a nail into a fence post"]),
    "saw": dict(a="a saw", use="cut a plank",
                goals=["cut a long plank in half", "cut a branch off a tree", "shorten a wooden board"]),
    "needle": dict(a="a needle and thread", use="sew up a tear",
                   goals=["mend a hole in a sock", "sew a button back on a coat", "fix a torn shirt"]),
    "broom": dict(a="a broom", use="sweep the floor",
                  goals=["clean the dust off the kitchen floor", "sweep the leaves from the path", "clear the crumbs from the floor"]),
    "bucket": dict(a="a bucket", use="carry water",
                   goals=["bring water from the well", "carry water to the garden", "fetch water to wash the floor"]),
    "ladder": dict(a="a ladder", use="reach high places",
                   goals=["reach the apples at the top of the tree", "fix a hole in the roof", "clean a high window"]),
    "umbrella": dict(a="an umbrella", use="stay dry in the rain",
                     goals=["keep dry while walking in the rain", "walk to the market in a storm without getting wet", "stay dry at a rainy fair"]),
    "lantern": dict(a="a lantern", use="see in the dark",
                    goals=["find the way home at night", "look for a lost coin in a dark cellar", "see the path through the woods after sunset"]),
    "spoon": dict(a="a spoon", use="stir the soup",
                  goals=["stir the soup in the pot", "eat a bowl of porridge", "mix sugar into a cup of tea"]),
    "spade": dict(a="a spade", use="dig a hole",
                  goals=["dig a hole for a young tree", "turn over the soil in the garden", "dig up potatoes"]),
    "scissors": dict(a="a pair of scissors", use="cut paper",
                     goals=["cut a picture out of a newspaper", "trim a sheet of paper", "cut a length of ribbon"]),
    "rope": dict(a="a rope", use="tie things",
                 goals=["tie a boat to the dock", "pull a bucket up from the well", "tie a load onto a cart"]),
    "kettle": dict(a="a kettle", use="boil water",
                   goals=["boil water for tea", "heat water to wash the dishes", "make hot water for a bath"]),
    "blanket": dict(a="a wool blanket", use="keep warm",
                    goals=["keep warm on a cold night", "keep a baby warm in winter", "stay warm while sitting outside in the snow"]),
    "comb": dict(a="a comb", use="untangle hair",
                 goals=["untangle long hair", "tidy a horse's mane", "smooth your hair before a party"]),
    "map": dict(a="a map", use="find the way",
                goals=["find the way to a new town", "plan a walk through the hills", "find the road to the coast"]),
    "key": dict(a="a key", use="open a lock",
                goals=["open a locked door", "open a locked chest", "unlock the garden gate"]),
    "net": dict(a="a net", use="catch fish",
                goals=["catch fish in the river", "catch butterflies in a meadow", "scoop leaves out of a pond"]),
    "glue": dict(a="some glue", use="stick things together",
                 goals=["fix a broken cup", "stick a stamp on a letter", "join two pieces of card"]),
}
TOOL_NAMES = list(TOOLS)

# Portable objects for binding stories (lambada-like).
OBJECTS = ["basket", "lantern", "rope", "map", "kettle", "blanket", "drum", "book", "bucket",
           "umbrella", "flute", "hammer", "shovel", "candle", "compass", "ladder", "kite", "violin",
           "teapot", "saddle", "mirror", "clock", "sack", "bell", "fiddle", "pillow", "spade", "jar"]
# Sizes (rank, larger = bigger) of everyday things and containers: the
# knowledge behind "X would not fit into Y because X was too big" items.
ITEM_SIZE = {"ladder": 6, "saddle": 5, "drum": 4, "kettle": 3, "book": 3, "lantern": 3, "clock": 3,
             "candle": 2, "compass": 1, "coin": 1, "ring": 1, "button": 1}
CONTAINER_SIZE = {"sack": 5, "basket": 4, "bucket": 4, "teapot": 3, "jar": 2, "cup": 2, "thimble": 0}
MATERIAL_ADJ = {"wood": "wooden", "cork": "cork", "iron": "iron", "copper": "copper", "stone": "stone",
                "glass": "glass", "wool": "woollen", "paper": "paper", "clay": "clay"}
# How an animal of each class escapes (winogrande-style knowledge items).
CLASS_ESCAPE = {"bird": "flew up into a tall tree", "fish": "swam down into the deep water",
                "mammal": "ran off across the field", "insect": "crawled under a leaf",
                "reptile": "crept under a warm rock"}
PET_KINDS = ["cat", "dog", "bird"]
FOODS = ["apples", "pears", "eggs", "loaves", "carrots", "plums", "onions", "fish", "cakes", "potatoes"]

# Social situations (social-iqa-like): (situation, question, right, wrong, wrong)
SOCIAL = [
    ("{A} gave {B} a warm coat on a cold day.", "How would {B} feel as a result?", "thankful", "angry", "hungry"),
    ("{A} lost the key to {apos} house.", "What will {A} want to do next?", "look for the key", "paint the door", "plant a tree"),
    ("{A} won the race at the summer fair.", "How would {A} feel afterwards?", "proud", "sad", "sleepy"),
    ("{A} forgot {B}'s birthday.", "How would {B} feel as a result?", "hurt", "proud", "full"),
    ("{A} helped {B} carry the heavy sacks up the hill.", "How would you describe {A}?", "helpful", "lazy", "rude"),
    ("{A} broke {B}'s favourite cup.", "What should {A} do next?", "say sorry", "laugh loudly", "break another cup"),
    ("{A} cooked a big dinner for the whole family.", "What will the family want to do?", "thank {A}", "shout at {A}", "go to bed hungry"),
    ("{A} stayed up all night reading a book.", "How would {A} feel in the morning?", "tired", "rested", "hungry for soup"),
    ("{A} found a purse full of coins in the street.", "What should {A} do?", "return it to its owner", "throw it in the river", "hide it from everyone"),
    ("{A} was caught in the rain without an umbrella.", "How would {A} feel?", "wet and cold", "warm and dry", "proud"),
    ("{A} told {B} a very funny story.", "How would {B} react?", "laugh", "cry", "fall asleep"),
    ("{A} worked in the fields all day in the hot sun.", "What will {A} want to do next?", "rest and drink water", "run a long race", "work all night"),
    ("{A} shared {apos} lunch with {B}, who had forgotten {bpos}.", "How would you describe {A}?", "kind", "greedy", "cruel"),
    ("{A} missed the last boat home.", "What will {A} need to do?", "find a place to sleep", "catch the boat", "go fishing"),
    ("{A} practised the fiddle every day for a year.", "What will happen at the concert?", "{A} will play well", "{A} will forget how to play", "{A} will lose the fiddle"),
    ("{A} knocked over a jug of milk at the table.", "What will {A} want to do next?", "wipe up the milk", "drink from the floor", "buy a horse"),
]

# Winogrande-like comparison schemas: (fact template with {X} {Y}, trigger
# sentence when the blank is X, trigger sentence when the blank is Y).
COMPARISONS = [
    ("{X} is much taller than {Y}", "so _ could reach the high shelf without a stool", "so _ needed a stool to reach the high shelf"),
    ("{X} runs much faster than {Y}", "so _ won the race easily", "so _ came last in the race"),
    ("{X} is far older than {Y}", "so _ remembered the great flood", "so _ had never heard of the great flood"),
    ("{X} is much stronger than {Y}", "so _ carried the heavy chest up the stairs", "so _ asked for help with the heavy chest"),
    ("{X} got up much earlier than {Y}", "so _ saw the sunrise over the hills", "so _ missed the sunrise over the hills"),
    ("{X} had a big breakfast but {Y} had nothing", "so by noon _ was still full", "so by noon _ was very hungry"),
    ("{X} brought an umbrella but {Y} did not", "so _ stayed dry in the storm", "so _ got soaked in the storm"),
    ("{X} studied hard for the test but {Y} did not", "so _ passed the test", "so _ failed the test"),
    ("{X} wore a thick coat but {Y} wore only a shirt", "so _ felt warm in the snow", "so _ shivered in the snow"),
    ("{X} saved every coin but {Y} spent them all", "so _ could buy the new boat", "so _ could not afford the new boat"),
]
