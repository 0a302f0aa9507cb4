package docs

// examples are requests people make that each tool does (indexed by
// find_tools, never sent to the model).
var examples = map[string][]string{
	"docs_create": {
		"write a new google doc from these notes",
		"make a document called minutes",
		"create a new google doc",
		"start a document with this text",
		"create a doc",
		"new google doc for the meeting notes",
		"make a document with this text",
		"write a new document called plan",
		"put the draft into a new google doc",
	},
	"docs_read": {
		"what is in the google doc",
		"read me the document text",
		"read the google doc",
		"what does the document say about the deadline",
		"show the text of the doc",
		"read the doc",
		"what's written in the document",
		"summarize the google doc",
		"open the doc and tell me what it says",
		"show me the contents of the document",
	},
	"docs_write": {
		"add text to the end of the doc",
		"insert a paragraph after the introduction",
		"write a new section in the document",
		"add a paragraph to the doc",
		"append text at the end of the document",
		"write a conclusion into the google doc",
		"insert a section under the heading",
		"put these notes into the existing doc",
	},
	"docs_replace": {
		"replace a word everywhere in the doc",
		"find and replace the old name in the document",
		"correct a misspelling throughout the doc",
		"replace every mention of the old name in the doc",
		"find and replace in the document",
		"change one word to another throughout the doc",
		"swap the date everywhere in the google doc",
		"fix a typo all through the document",
	},
	"docs_comments": {
		"show the comments on the document",
		"what did reviewers say in the doc",
		"list the feedback left on the doc",
		"what comments are on the doc",
		"show the feedback on my document",
		"did anyone leave notes on the google doc",
		"list the review comments",
		"what did people say about my draft doc",
	},
}
