package slides

// examples are requests people make that each tool does (indexed by
// find_tools, never sent to the model).
var examples = map[string][]string{
	"slides_create":       {"create a new google slides presentation", "start a deck for the meeting"},
	"slides_read":         {"read the presentation", "what is on each slide", "give me the text of the slide deck"},
	"slides_add":          {"add a new slide with a title and bullets", "append a slide at the end of the deck"},
	"slides_replace_text": {"replace text on all the slides", "change a word throughout the presentation"},
	"slides_insert_image": {"add an image to a slide", "put a picture from a link on the slide"},
}
