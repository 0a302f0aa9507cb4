package slides

// examples are requests people make that each tool does (indexed by
// find_tools, never sent to the model).
var examples = map[string][]string{
	"slides_create": {
		"create a new google slides presentation",
		"start a deck for the meeting",
		"create a presentation",
		"make a slide deck",
		"new google slides for the meeting",
		"start a presentation called Plan",
		"build a deck for my pitch",
	},
	"slides_read": {
		"read the presentation",
		"what is on each slide",
		"give me the text of the slide deck",
		"read the slides",
		"what does the deck say",
		"summarize the presentation",
		"show the speaker notes",
		"what's on slide 3",
	},
	"slides_add": {
		"add a new slide with a title and bullets",
		"append a slide at the end of the deck",
		"add a slide",
		"insert a new slide with a title",
		"put another slide in the deck",
		"append a slide with bullet points",
		"a new page at the end of the presentation",
	},
	"slides_replace_text": {
		"replace text on all the slides",
		"change a word throughout the presentation",
		"replace a word on every slide",
		"change the name throughout the deck",
		"find and replace in the presentation",
		"update the year on all slides",
		"swap the old title for the new one in the slides",
	},
	"slides_insert_image": {
		"add an image to a slide",
		"put a picture from a link on the slide",
		"put an image on the slide",
		"add a picture to the deck",
		"insert the logo into the presentation",
		"place a photo from this url on slide 2",
		"add a chart image to the slides",
	},
}
