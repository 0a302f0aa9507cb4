package drive

// examples are requests people make that each tool does (indexed by
// find_tools, never sent to the model).
var examples = map[string][]string{
	"drive_search": {"is there a file about taxes in my drive", "which files did I change recently", "find the contract file in google drive", "which drive files mention the budget", "look for my scanned passport in drive",
		"recent documents I edited"},
	"drive_get":           {"who can see this drive file", "when was the drive file last changed and by whom", "get the link to that file"},
	"drive_read":          {"open the doc in drive and summarize it", "read the text of that drive file", "what does the shared document say"},
	"drive_export":        {"save the google doc as a pdf in our files", "export the sheet to xlsx", "convert the document to word and keep it here"},
	"drive_create_file":   {"store this list as a file on my drive", "upload the notes to google drive", "create a text file in drive"},
	"drive_create_folder": {"new folder on drive called invoices", "make a drive folder for the project"},
	"drive_move":          {"file this document in the projects folder", "tidy my drive into folders", "put that file into the folder for 2026", "move the spreadsheet to the shared folder", "organize the scans into their folder"},
	"drive_share":         {"let my brother see the photos folder", "send someone access to a drive file", "give Ana access to the folder", "share the document with the team as editors", "let someone view this file"},
	"drive_unshare":       {"remove someone's access to the file", "stop sharing the folder", "revoke the public link"},
	"drive_trash":         {"delete the drive file", "move the old spreadsheet to the bin", "trash a document in google drive"},
}
